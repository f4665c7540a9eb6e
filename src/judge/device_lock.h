// DeviceLock: a device's execution lock, held across processes. Correctness
// trials share the device (shared), timing and baselines hold it alone
// (exclusive), whichever adaexplore process runs them: a run, or each of
// several `adaexplore worker` processes on one GPU. In the process it is a
// shared lock that prefers writers; across processes, flock(2) on one lock
// file per physical device (released by the kernel when a process dies),
// with a turnstile file beside it for the same preference. Satisfies the
// standard's SharedLockable, so std::shared_lock and std::lock_guard work.
//
// Writers first: a waiting exclusive holder stops new shared holders, so a
// timing run waits for the trials in flight, not for a stream of trials that
// overlap one another (a reader-preferring lock, as pthread's default
// rwlock is, kept timing waiting for seconds with eight tasks in flight).
// Shared holds do not nest: a thread that holds the lock shared must not ask
// for it shared again while another thread may be waiting for it alone.
#pragma once

#include <condition_variable>
#include <mutex>
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
  std::mutex mu_;
  std::condition_variable cv_;
  int readers_ = 0;          // in-process shared holders (one flock LOCK_SH for them all)
  int writers_waiting_ = 0;  // in-process threads waiting to hold it alone
  bool writer_ = false;      // held alone by a thread of this process
  std::mutex turn_mu_;       // one turnstile pass at a time in this process
  int fd_ = -1;              // the lock file
  int turn_fd_ = -1;         // the turnstile: held by a writer while it waits
};

// The lock file of a local device: "cpu" or "cuda:N" (N in this process's
// numbering, mapped through CUDA_VISIBLE_DEVICES to the physical GPU), in
// ADAEXPLORE_LOCK_DIR, else /dev/shm, else /tmp.
std::string DeviceLockFile(const std::string& device);

}  // namespace ax
