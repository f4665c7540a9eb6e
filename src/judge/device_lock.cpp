#include "judge/device_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "judge/device_spec.h"

namespace ax {

namespace {
void Flock(int fd, int op) {
  if (fd < 0) return;
  while (flock(fd, op) != 0 && errno == EINTR) {
  }
}
}  // namespace

DeviceLock::DeviceLock(const std::string& lock_file) {
  if (lock_file.empty()) return;
  fd_ = open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    std::fprintf(stderr, "judge: cannot open the device lock %s; other processes on this device are not excluded\n",
                 lock_file.c_str());
    return;
  }
  // Without the turnstile the lock still excludes; it only loses the
  // writers' preference across processes.
  turn_fd_ = open((lock_file + ".turn").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) close(fd_);
  if (turn_fd_ >= 0) close(turn_fd_);
}

// Exclusive: first in this process (after the shared holders in flight,
// ahead of any that come later), then across processes: the turnstile is
// held while waiting for the file lock, so that other processes' new shared
// holders queue behind this one.
void DeviceLock::lock() {
  {
    std::unique_lock<std::mutex> l(mu_);
    ++writers_waiting_;
    cv_.wait(l, [&] { return !writer_ && readers_ == 0; });
    --writers_waiting_;
    writer_ = true;
  }
  std::lock_guard<std::mutex> t(turn_mu_);
  Flock(turn_fd_, LOCK_EX);
  Flock(fd_, LOCK_EX);
  Flock(turn_fd_, LOCK_UN);
}

void DeviceLock::unlock() {
  Flock(fd_, LOCK_UN);
  {
    std::lock_guard<std::mutex> l(mu_);
    writer_ = false;
  }
  cv_.notify_all();
}

// Shared: a pass through the turnstile first (it waits while another
// process's writer waits), outside mu_, since this process's holders must be
// able to release while that writer waits for them. The first holder in the
// process takes the file lock shared for all of them.
void DeviceLock::lock_shared() {
  {
    std::lock_guard<std::mutex> t(turn_mu_);
    Flock(turn_fd_, LOCK_EX);
    Flock(turn_fd_, LOCK_UN);
  }
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !writer_ && writers_waiting_ == 0; });
  // Under mu_: no holder here can be waiting to release (there is none yet),
  // and a writer of another process releases without this process.
  if (readers_ == 0) Flock(fd_, LOCK_SH);
  ++readers_;
}

void DeviceLock::unlock_shared() {
  bool last = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    last = --readers_ == 0;
    if (last) Flock(fd_, LOCK_UN);
  }
  if (last) cv_.notify_all();
}

std::string DeviceLockFile(const std::string& device) {
  std::string dir;
  if (const char* d = getenv("ADAEXPLORE_LOCK_DIR"); d && *d) {
    dir = d;
  } else {
    dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  }
  std::string id = device == "cpu" ? "cpu" : "gpu-" + PhysicalGpuId(device);
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return dir + "/adaexplore-device-" + id + ".lock";
}

}  // namespace ax
