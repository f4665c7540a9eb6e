// The broker's key layout (docs/distributed.md): one job stream per GPU model
// plus "any", read by the consumer group "judges"; a result stream per
// client; a once-only marker per job; worker heartbeats; the shared cache.
#pragma once

#include <string>

namespace ax::broker {

inline constexpr const char* kGroup = "judges";
inline constexpr const char* kAnyModel = "any";

struct Keys {
  std::string prefix = "adaexplore";

  std::string JobStream(const std::string& model) const { return prefix + ":jobs:" + model; }
  std::string JobStreamPattern() const { return prefix + ":jobs:*"; }
  std::string Results(const std::string& client) const { return prefix + ":results:" + client; }
  std::string ResultsPrefix() const { return prefix + ":results:"; }
  std::string Done(const std::string& job) const { return prefix + ":done:" + job; }
  std::string Workers() const { return prefix + ":workers"; }
  std::string Worker(const std::string& name) const { return prefix + ":worker:" + name; }
  std::string Cache(const std::string& table) const { return prefix + ":cache:" + table; }
  std::string Stats() const { return prefix + ":stats"; }
};

// A GPU model's stream name: "NVIDIA H200" -> "nvidia-h200"; "cpu" stays.
std::string ModelSlug(const std::string& device_name);

// A fresh random identifier (32 hex digits).
std::string RandomId();

// Letters, digits, '-', '_' and '.', 1 to 100 of them (names, ids, models).
bool SafeName(const std::string& s);

}  // namespace ax::broker
