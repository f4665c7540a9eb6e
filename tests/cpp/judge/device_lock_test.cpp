#include "judge/device_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace ax {

namespace {
double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string TempLockFile() {
  char tmpl[] = "/tmp/ax-lock-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  return tmpl;
}

// A child process that holds the lock (exclusive or shared) for `hold_s`
// once started; returns after the child says it holds it.
pid_t HoldInChild(const std::string& file, bool exclusive, double hold_s) {
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    DeviceLock l(file);
    if (exclusive) l.lock(); else l.lock_shared();
    char c = 'x';
    if (write(p[1], &c, 1) != 1) _exit(2);
    usleep(static_cast<useconds_t>(hold_s * 1e6));
    _exit(0);
  }
  close(p[1]);
  char c;
  EXPECT_EQ(read(p[0], &c, 1), 1);
  close(p[0]);
  return pid;
}

// Readers that keep the lock shared without a gap: each holds it 30 ms,
// lets go for 1 ms and takes it again, the threads staggered, until *stop or
// `max_s` pass. Returns the threads.
std::vector<std::thread> OverlappingReaders(DeviceLock* l, std::atomic<bool>* stop, int n, double max_s) {
  std::vector<std::thread> ts;
  const double end = Now() + max_s;
  for (int k = 0; k < n; ++k) {
    ts.emplace_back([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(8 * k));
      while (!stop->load() && Now() < end) {
        l->lock_shared();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        l->unlock_shared();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  return ts;
}
}  // namespace

TEST(DeviceLock, ExclusiveInAnotherProcessHoldsOffSharedHere) {
  const std::string file = TempLockFile();
  DeviceLock here(file);
  ASSERT_TRUE(here.cross_process());
  pid_t child = HoldInChild(file, true, 0.4);
  const double t0 = Now();
  here.lock_shared();
  const double waited = Now() - t0;
  here.unlock_shared();
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_GT(waited, 0.25);
  unlink(file.c_str());
}

TEST(DeviceLock, SharedInAnotherProcessHoldsOffExclusiveHereButNotShared) {
  const std::string file = TempLockFile();
  DeviceLock here(file);
  pid_t child = HoldInChild(file, false, 0.4);
  double t0 = Now();
  here.lock_shared();  // shared next to shared: at once
  EXPECT_LT(Now() - t0, 0.2);
  here.unlock_shared();
  t0 = Now();
  here.lock();
  const double waited = Now() - t0;
  here.unlock();
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_GT(waited, 0.25);
  unlink(file.c_str());
}

TEST(DeviceLock, ADeadHolderReleasesTheDevice) {
  const std::string file = TempLockFile();
  pid_t child = HoldInChild(file, true, 30.0);
  kill(child, SIGKILL);
  int st = 0;
  waitpid(child, &st, 0);
  DeviceLock here(file);
  const double t0 = Now();
  here.lock();
  EXPECT_LT(Now() - t0, 1.0);
  here.unlock();
  unlink(file.c_str());
}

TEST(DeviceLock, InProcessSharedHoldersCoexistAndExcludeExclusive) {
  DeviceLock l(TempLockFile());
  l.lock_shared();
  l.lock_shared();  // a second thread's trial, here on one thread
  bool got = false;
  std::thread t([&] {
    l.lock();
    got = true;
    l.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got);
  l.unlock_shared();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got);  // the other holder still has it
  l.unlock_shared();
  t.join();
  EXPECT_TRUE(got);
}

// A timing run waits for the trials in flight, not for every trial that
// starts while it waits (a reader-preferring lock would hold it off until the
// readers stop, here after 10 s).
TEST(DeviceLock, AWaitingExclusiveHolderStopsNewSharedHoldersHere) {
  DeviceLock l(TempLockFile());
  std::atomic<bool> stop{false};
  auto readers = OverlappingReaders(&l, &stop, 4, 10.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double t0 = Now();
  l.lock();
  const double waited = Now() - t0;
  l.unlock();
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_LT(waited, 2.0);
}

TEST(DeviceLock, AWaitingExclusiveHolderStopsNewSharedHoldersInAnotherProcess) {
  const std::string file = TempLockFile();
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    DeviceLock there(file);
    std::atomic<bool> stop{false};
    auto readers = OverlappingReaders(&there, &stop, 4, 10.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    char c = 'x';
    if (write(p[1], &c, 1) != 1) _exit(2);
    for (auto& t : readers) t.join();
    _exit(0);
  }
  close(p[1]);
  char c;
  ASSERT_EQ(read(p[0], &c, 1), 1);
  close(p[0]);
  DeviceLock here(file);
  const double t0 = Now();
  here.lock();
  const double waited = Now() - t0;
  here.unlock();
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_LT(waited, 2.0);
  unlink(file.c_str());
  unlink((file + ".turn").c_str());
}

TEST(DeviceLock, LockFilesNameThePhysicalDevice) {
  setenv("ADAEXPLORE_LOCK_DIR", "/tmp/locks", 1);
  setenv("CUDA_VISIBLE_DEVICES", "3,GPU-ab:cd", 1);
  EXPECT_EQ(DeviceLockFile("cuda:0"), "/tmp/locks/adaexplore-device-gpu-3.lock");
  EXPECT_EQ(DeviceLockFile("cuda:1"), "/tmp/locks/adaexplore-device-gpu-GPU-ab_cd.lock");
  EXPECT_EQ(DeviceLockFile("cpu"), "/tmp/locks/adaexplore-device-cpu.lock");
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(DeviceLockFile("cuda:2"), "/tmp/locks/adaexplore-device-gpu-2.lock");
  unsetenv("ADAEXPLORE_LOCK_DIR");
}

}  // namespace ax
