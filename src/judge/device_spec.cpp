#include "judge/device_spec.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/util.h"

namespace ax {

std::string DeviceSpec::request_device() const {
  if (devices.size() == 1) return devices[0];
  return "cuda";
}

namespace {
bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}
}  // namespace

std::string PhysicalGpuId(const std::string& device) {
  std::string idx = device.size() > 5 ? device.substr(5) : "0";
  if (const char* vis = getenv("CUDA_VISIBLE_DEVICES"); vis && *vis) {
    std::vector<std::string> ids;
    std::stringstream ss(vis);
    std::string item;
    while (std::getline(ss, item, ',')) ids.push_back(Trim(item));
    const size_t i = static_cast<size_t>(std::atoi(idx.c_str()));
    if (i < ids.size()) return ids[i];
  }
  return idx;
}

int VisibleGpuCount() {
  if (const char* vis = getenv("CUDA_VISIBLE_DEVICES")) {
    std::string s = Trim(vis);
    if (s.empty() || s == "-1") return 0;
    int n = 0;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (Trim(item).empty() || Trim(item) == "-1") break;  // CUDA stops at an invalid entry
      ++n;
    }
    return n;
  }
  int n = 0;
  std::error_code ec;
  while (std::filesystem::exists("/dev/nvidia" + std::to_string(n), ec)) ++n;
  return n;
}

Status ParseDeviceSpec(const std::string& raw, int visible_gpus, DeviceSpec* out) {
  out->devices.clear();
  const std::string spec = Trim(raw);
  if (spec.empty()) {
    out->devices = {visible_gpus > 0 ? "cuda:0" : "cpu"};
    return Status::Ok();
  }
  if (spec == "all") {
    for (int i = 0; i < visible_gpus; ++i) out->devices.push_back("cuda:" + std::to_string(i));
    if (out->devices.empty()) out->devices = {"cpu"};
    return Status::Ok();
  }
  std::stringstream ss(spec);
  std::string item;
  auto bad = [&](const std::string& why) {
    return Status::Error("bad --device '" + spec + "': " + why + " (cpu, cuda, cuda:N, a list cuda:0,cuda:1, or all)");
  };
  while (std::getline(ss, item, ',')) {
    item = Trim(item);
    std::string d;
    if (item == "cpu") {
      d = "cpu";
    } else if (item == "cuda") {
      d = "cuda:0";
    } else if (item.rfind("cuda:", 0) == 0 && AllDigits(item.substr(5))) {
      d = "cuda:" + std::to_string(std::atoi(item.c_str() + 5));
    } else {
      return bad("'" + item + "' is not a device");
    }
    for (const auto& have : out->devices) {
      if (have == d) return bad(d + " is named twice");
    }
    out->devices.push_back(d);
  }
  if (out->devices.empty()) return bad("no device");
  bool cpu = false, gpu = false;
  for (const auto& d : out->devices) (d == "cpu" ? cpu : gpu) = true;
  if (cpu && gpu) return bad("the CPU and GPUs cannot share a run (their times do not compare)");
  return Status::Ok();
}

}  // namespace ax
