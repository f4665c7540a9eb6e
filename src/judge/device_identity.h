// DeviceIdentity: one device of the local judge pool as the judge knows it:
// its spelling ("cpu", "cuda:1"), its index, what its first trusted worker
// reported (torch, Triton and Python versions, the GPU's name and memory), and
// the memory gate that admits candidates to it.
#pragma once

#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "judge/mem_gate.h"
#include "judge/profile.h"

namespace ax {

class DeviceIdentity {
 public:
  explicit DeviceIdentity(std::string device);

  const std::string& device() const { return device_; }
  bool cpu() const { return device_ == "cpu"; }
  // The GPU's index in this process's numbering (cuda:N), -1 on the CPU.
  int index() const { return index_; }
  // Inside a worker the device is always cuda:0 (CUDA_VISIBLE_DEVICES picks it).
  std::string local() const { return cpu() ? "cpu" : "cuda:0"; }

  // The first trusted worker's hello reply; later ones report the same versions.
  void SetEnvOnce(const nlohmann::json& hello);
  nlohmann::json env() const;
  // "cpu", or the GPU's name ("NVIDIA H200").
  std::string name() const;
  // The measured facts (op `device_facts`), once measured.
  void SetFacts(const DeviceFacts& f);
  std::optional<DeviceFacts> facts() const;

  MemGate mem;

 private:
  const std::string device_;
  const int index_;
  mutable std::mutex mu_;
  nlohmann::json env_;
  std::optional<DeviceFacts> facts_;
};

}  // namespace ax
