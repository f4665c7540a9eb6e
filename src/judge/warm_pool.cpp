#include "judge/warm_pool.h"

#include <chrono>

#include "common/util.h"
#include "judge/worker_launch.h"

namespace ax {

WarmPool::WarmPool(const PoolConfig& cfg, std::string device, int target, const std::atomic<bool>* stop)
    : cfg_(cfg), device_(std::move(device)), target_(target), stop_(stop) {}

WarmPool::~WarmPool() { Stop(); }

void WarmPool::Start() {
  for (int i = 0; i < target_; ++i) spawners_.emplace_back([this] { SpawnLoop(); });
}

void WarmPool::Stop() {
  // Taking the mutex once after the stop flag was set closes the gap between
  // a waiter's check of its predicate and its wait.
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
  for (auto& t : spawners_) t.join();
  spawners_.clear();
  warm_.clear();
}

void WarmPool::SpawnLoop() {
  while (!*stop_) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_->load() || static_cast<int>(warm_.size()) + starting_ < target_; });
      if (*stop_) return;
      if (cfg_.max_spawns >= 0 && spawned_ >= cfg_.max_spawns) {
        limit_reached_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return stop_->load(); });
        return;
      }
      ++spawned_;
      ++starting_;
    }
    WorkerConfig wc = JudgeWorkerConfig(cfg_, device_, kRoleCandidate);
    wc.scratch = MakeTempDir(cfg_.scratch_root, "cand-");
    std::string error;
    std::unique_ptr<Worker> w;
    if (wc.scratch.empty()) {
      error = "cannot create a scratch folder under " + cfg_.scratch_root;
    } else {
      // A pool that is being destroyed does not wait for warm-ups.
      w = StartJudgeWorker(wc, cfg_.worker_start_timeout_s, &error, stop_);
    }
    const bool failed = !w;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --starting_;
      if (w) {
        warm_.push_back({std::move(w), wc.scratch});
        spawn_error_.clear();
      } else {
        RemoveTree(wc.scratch);
        spawn_error_ = error;
      }
    }
    cv_.notify_all();
    // Back off after a failed start; takers see the error meanwhile.
    if (failed && !*stop_) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

bool WarmPool::Take(WarmWorker* out, std::string* error) {
  std::unique_lock<std::mutex> lock(mu_);
  const double deadline = NowSeconds() + cfg_.worker_start_timeout_s;
  while (warm_.empty()) {
    // An error counts once nothing is still starting that could become ready.
    if (starting_ == 0 && limit_reached_) {
      *error = "this judge pool starts at most " + std::to_string(cfg_.max_spawns) + " candidate workers";
      return false;
    }
    if (!spawn_error_.empty() && starting_ == 0) {
      *error = spawn_error_;
      return false;
    }
    if (*stop_ || NowSeconds() > deadline) {
      *error = "no judge worker became ready";
      return false;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
  *out = std::move(warm_.front());
  warm_.pop_front();
  cv_.notify_all();
  return true;
}

}  // namespace ax
