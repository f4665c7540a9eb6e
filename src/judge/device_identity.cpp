#include "judge/device_identity.h"

#include <cstdlib>

namespace ax {

namespace {
int IndexOf(const std::string& d) {
  if (d.rfind("cuda", 0) != 0) return -1;
  return d.size() > 5 ? std::atoi(d.c_str() + 5) : 0;
}
}  // namespace

DeviceIdentity::DeviceIdentity(std::string device) : device_(std::move(device)), index_(IndexOf(device_)) {}

void DeviceIdentity::SetEnvOnce(const nlohmann::json& hello) {
  std::lock_guard<std::mutex> lock(mu_);
  if (env_.is_null() || env_.empty()) env_ = hello;
}

nlohmann::json DeviceIdentity::env() const {
  std::lock_guard<std::mutex> lock(mu_);
  return env_;
}

std::string DeviceIdentity::name() const {
  if (cpu()) return "cpu";
  std::lock_guard<std::mutex> lock(mu_);
  return env_.is_object() ? env_.value("gpu", device_) : device_;
}

void DeviceIdentity::SetFacts(const DeviceFacts& f) {
  std::lock_guard<std::mutex> lock(mu_);
  facts_ = f;
}

std::optional<DeviceFacts> DeviceIdentity::facts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return facts_;
}

}  // namespace ax
