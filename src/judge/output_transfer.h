// OutputTransfer: how a candidate's outputs reach the trusted reference on
// one device. Device to device where both sides can (CUDA memory exported
// over the workers' descriptor channel, docs/worker-protocol.md); a candidate
// whose hand-over fails goes through files, and after three such candidates
// the whole device does (one candidate cannot switch it off for everyone).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judge/worker.h"

namespace ax {

class OutputTransfer {
 public:
  explicit OutputTransfer(std::string device) : device_(std::move(device)) {}

  // Whether outputs may go device to device now.
  bool device_to_device() const { return vmm_.load(); }
  // One candidate's hand-over failed.
  void NoteFailure(const std::string& why);

  // Takes the descriptors of the outputs a reply announced as device to
  // device from the candidate's channel, in order; false (and why) when one
  // does not arrive.
  static bool TakeFds(Worker* w, const nlohmann::json& outputs, std::vector<int>* fds, std::string* error);
  // Relays the descriptors to the reference (closing them here); false when
  // the reference's channel refuses one.
  bool Relay(Worker* reference, std::vector<int>* fds);
  static void CloseAll(std::vector<int>* fds);

 private:
  void Disable(const std::string& why);

  const std::string device_;
  std::atomic<bool> vmm_{true};
  std::atomic<int> failures_{0};
};

}  // namespace ax
