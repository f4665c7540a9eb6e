// WarmPool: the candidate workers of one device that have started (imports
// done, no CUDA context yet) and wait for a candidate. Spawner threads keep
// `target` of them warm; a start that fails is retried after a pause, and its
// reason is what a taker hears if nothing else becomes ready.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "judge/judge.h"
#include "judge/worker.h"

namespace ax {

struct WarmWorker {
  std::unique_ptr<Worker> worker;
  std::string scratch;
};

class WarmPool {
 public:
  // `stop` is the pool's stop flag: set, it ends the spawners and cancels
  // starts in progress.
  WarmPool(const PoolConfig& cfg, std::string device, int target, const std::atomic<bool>* stop);
  ~WarmPool();
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  void Start();
  // Wakes and joins the spawners (after the stop flag was set); drops the warm workers.
  void Stop();
  // A warm worker of its own; false (and why) when none can become ready.
  bool Take(WarmWorker* out, std::string* error);

 private:
  void SpawnLoop();

  const PoolConfig& cfg_;
  const std::string device_;
  const int target_;
  const std::atomic<bool>* stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WarmWorker> warm_;
  std::string spawn_error_;
  int spawned_ = 0;
  int starting_ = 0;            // workers being started now
  bool limit_reached_ = false;  // max_spawns workers were started
  std::vector<std::thread> spawners_;  // starts (imports) take seconds: they run in parallel
};

}  // namespace ax
