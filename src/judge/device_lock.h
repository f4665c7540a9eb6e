// DeviceLock: a device's execution lock, held across processes. Correctness
// trials share the device (shared), timing and baselines hold it alone
// (exclusive), whichever adaexplore process runs them: a run, or each of
// several `adaexplore worker` processes on one GPU. In the process it is a
// shared mutex; across processes, flock(2) on one lock file per physical
// device (released by the kernel when a process dies). Satisfies the
// standard's SharedLockable, so std::shared_lock and std::lock_guard work.
#pragma once

#include <mutex>
#include <shared_mutex>
#include <string>

namespace ax {

class DeviceLock {
 public:
  // lock_file: the device's lock file (created); empty: this process only.
  explicit DeviceLock(const std::string& lock_file);
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  void lock();
  void unlock();
  void lock_shared();
  void unlock_shared();

  // Whether the lock reaches other processes (the file could be opened).
  bool cross_process() const { return fd_ >= 0; }

 private:
  std::shared_mutex mu_;
  std::mutex count_mu_;
  int shared_count_ = 0;  // in-process shared holders (one flock LOCK_SH for them all)
  int fd_ = -1;
};

// The lock file of a local device: "cpu" or "cuda:N" (N in this process's
// numbering, mapped through CUDA_VISIBLE_DEVICES to the physical GPU), in
// ADAEXPLORE_LOCK_DIR, else /dev/shm, else /tmp.
std::string DeviceLockFile(const std::string& device);

}  // namespace ax
