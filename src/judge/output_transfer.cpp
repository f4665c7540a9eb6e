#include "judge/output_transfer.h"

#include <unistd.h>

#include <cstdio>

#include "common/util.h"

namespace ax {

void OutputTransfer::NoteFailure(const std::string& why) {
  if (++failures_ >= 3) Disable(why);
}

void OutputTransfer::Disable(const std::string& why) {
  if (vmm_.exchange(false)) {
    std::fprintf(stderr, "judge: device-to-device output transfer on %s failed (%s); outputs go through files\n",
                 device_.c_str(), FirstLine(why, 300).c_str());
  }
}

void OutputTransfer::CloseAll(std::vector<int>* fds) {
  for (int fd : *fds) close(fd);
  fds->clear();
}

bool OutputTransfer::TakeFds(Worker* w, const nlohmann::json& outputs, std::vector<int>* fds, std::string* error) {
  if (!outputs.is_array()) return true;
  for (const auto& out : outputs) {
    if (!out.is_object() || !out.value("vmm", false)) continue;
    int fd = w->RecvFd(10.0, error);
    if (fd < 0) {
      CloseAll(fds);
      return false;
    }
    fds->push_back(fd);
  }
  return true;
}

bool OutputTransfer::Relay(Worker* reference, std::vector<int>* fds) {
  for (int fd : *fds) {
    std::string err;
    if (!reference->SendFd(fd, &err)) {
      CloseAll(fds);
      reference->DrainFds();
      NoteFailure(err);
      return false;
    }
  }
  CloseAll(fds);
  return true;
}

}  // namespace ax
