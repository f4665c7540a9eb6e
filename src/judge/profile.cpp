#include "judge/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ax {

using json = nlohmann::json;

json DeviceFacts::ToJson() const {
  return {{"name", name}, {"sms", sms}, {"memory_bytes", memory_bytes}, {"copy_gbps", copy_gbps},
          {"fp32_tflops", fp32_tflops}, {"tf32_tflops", tf32_tflops}};
}

bool DeviceFacts::FromJson(const json& j, DeviceFacts* out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  DeviceFacts f;
  f.name = j["name"];
  f.sms = j.value("sms", 0);
  f.memory_bytes = j.value("memory_bytes", int64_t{0});
  f.copy_gbps = j.value("copy_gbps", 0.0);
  f.fp32_tflops = j.value("fp32_tflops", 0.0);
  f.tf32_tflops = j.value("tf32_tflops", 0.0);
  *out = f;
  return true;
}

std::string DeviceFacts::Describe() const {
  char buf[256];
  const double tbps = copy_gbps / 1e3;
  std::snprintf(buf, sizeof buf, "%s (%d SMs, %.0f GB, measured copy bandwidth %.*f %s, fp32 matmul %.0f TFLOP/s)",
                name.c_str(), sms, memory_bytes / 1e9, tbps >= 1 ? 2 : 1, tbps >= 1 ? tbps : copy_gbps,
                tbps >= 1 ? "TB/s" : "GB/s", fp32_tflops);
  return buf;
}

std::string HardwareLine(bool cuda, const DeviceFacts* facts) {
  if (!cuda) return "the CPU (Triton's interpreter; timings are CPU figures)";
  if (facts && !facts->name.empty()) return "an " + facts->Describe();
  return "an NVIDIA GPU";
}

json Profile::ToJson() const {
  json j = {{"busy_ms", busy_ms}, {"kernels", json::array()}};
  for (const auto& k : kernels) {
    j["kernels"].push_back({{"name", k.name}, {"ms", k.ms}, {"share", k.share}, {"launches", k.launches}});
  }
  if (roofline) {
    const Roofline& r = *roofline;
    j["roofline"] = {{"flops", r.flops},   {"bytes", r.bytes},
                     {"gbps", r.gbps},     {"tflops", r.tflops},
                     {"bandwidth_fraction", r.bandwidth_fraction}, {"flops_fraction", r.flops_fraction},
                     {"bound", r.bound},   {"peak_gbps", r.peak_gbps}, {"peak_tflops", r.peak_tflops}};
  }
  return j;
}

Profile Profile::FromJson(const json& j) {
  Profile p;
  if (!j.is_object()) return p;
  p.busy_ms = j.value("busy_ms", 0.0);
  if (j.contains("kernels") && j["kernels"].is_array()) {
    for (const auto& k : j["kernels"]) {
      if (!k.is_object()) continue;
      p.kernels.push_back({k.value("name", ""), k.value("ms", 0.0), k.value("share", 0.0), k.value("launches", 0)});
    }
  }
  if (j.contains("roofline") && j["roofline"].is_object()) {
    const json& r = j["roofline"];
    p.roofline = Roofline{r.value("flops", 0.0), r.value("bytes", 0.0),
                          r.value("gbps", 0.0), r.value("tflops", 0.0),
                          r.value("bandwidth_fraction", 0.0), r.value("flops_fraction", 0.0),
                          r.value("bound", ""),
                          r.value("peak_gbps", 0.0), r.value("peak_tflops", 0.0)};
  }
  return p;
}

std::string Profile::Summary() const {
  if (kernels.empty()) return "";
  char buf[512];
  const KernelTime& top = kernels.front();
  std::string name = top.name.size() > 60 ? top.name.substr(0, 57) + "..." : top.name;
  std::snprintf(buf, sizeof buf, "%zu kernel%s; `%s` %.0f%% of %.3g ms", kernels.size(), kernels.size() == 1 ? "" : "s",
                name.c_str(), top.share * 100, busy_ms);
  std::string s = buf;
  if (roofline) {
    const Roofline& r = *roofline;
    if (r.bound == "compute") {
      std::snprintf(buf, sizeof buf, "; %.0f%% of fp32-accurate matmul FLOP/s (compute-bound)", r.flops_fraction * 100);
    } else {
      std::snprintf(buf, sizeof buf, "; %.0f%% of copy bandwidth (memory-bound)", r.bandwidth_fraction * 100);
    }
    s += buf;
  }
  return s;
}

Profile MakeProfile(const json& kernel_times, const TaskInfo& task, const DeviceFacts* facts) {
  Profile p;
  if (!kernel_times.is_array()) return p;
  for (const auto& k : kernel_times) {
    if (!k.is_object() || !k.contains("ms") || !k["ms"].is_number()) continue;
    const double ms = k["ms"].get<double>();
    if (!(ms >= 0) || !std::isfinite(ms)) continue;
    p.kernels.push_back({k.value("name", std::string("?")), ms, 0, k.value("launches", 1)});
    p.busy_ms += ms;
  }
  std::stable_sort(p.kernels.begin(), p.kernels.end(), [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  for (auto& k : p.kernels) k.share = p.busy_ms > 0 ? k.ms / p.busy_ms : 0;
  if (facts && p.busy_ms > 0 && task.min_bytes > 0 && facts->copy_gbps > 0 && facts->fp32_tflops > 0) {
    Roofline r;
    const double seconds = p.busy_ms / 1e3;
    r.bytes = static_cast<double>(task.min_bytes);
    r.flops = task.flops.value_or(0);
    r.gbps = r.bytes / seconds / 1e9;
    r.tflops = r.flops / seconds / 1e12;
    r.bandwidth_fraction = r.gbps / facts->copy_gbps;
    r.peak_gbps = facts->copy_gbps;
    r.peak_tflops = facts->AccurateTflops();
    r.flops_fraction = r.tflops / r.peak_tflops;
    // The ridge: FLOPs per byte where the two peaks meet.
    const double ridge = r.peak_tflops * 1e12 / (facts->copy_gbps * 1e9);
    r.bound = r.flops / r.bytes > ridge ? "compute" : "memory";
    p.roofline = r;
  }
  return p;
}

}  // namespace ax
