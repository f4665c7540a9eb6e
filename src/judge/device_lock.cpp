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
  }
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) close(fd_);
}

void DeviceLock::lock() {
  mu_.lock();
  Flock(fd_, LOCK_EX);
}

void DeviceLock::unlock() {
  Flock(fd_, LOCK_UN);
  mu_.unlock();
}

void DeviceLock::lock_shared() {
  mu_.lock_shared();
  std::lock_guard<std::mutex> g(count_mu_);
  if (shared_count_++ == 0) Flock(fd_, LOCK_SH);
}

void DeviceLock::unlock_shared() {
  {
    std::lock_guard<std::mutex> g(count_mu_);
    if (--shared_count_ == 0) Flock(fd_, LOCK_UN);
  }
  mu_.unlock_shared();
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
