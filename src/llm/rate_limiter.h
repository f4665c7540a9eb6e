// RateLimiter: the concurrency limit and requests/tokens-per-minute limits of
// one run, shared by every task and client in it, so that many tasks running
// at once stay inside what the provider allows instead of drowning in 429s.
//
// Waiters queue first-in first-out and wait without holding a thread: a
// waiter hands in a scheduler (the event loop's timer) that the limiter uses
// to wake the queue when the time-based limits allow the next call.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "common/util.h"

namespace ax::llm {

struct RateLimits {
  int max_concurrency = 0;          // calls in flight at once; 0 = no limit
  double requests_per_minute = 0;   // 0 = no limit
  double tokens_per_minute = 0;     // input + output tokens; 0 = no limit
};

class RateLimiter : public std::enable_shared_from_this<RateLimiter> {
 public:
  using Clock = std::function<double()>;
  using Scheduler = std::function<void(double delay_s, std::function<void()>)>;

  static std::shared_ptr<RateLimiter> Create(RateLimits limits, Clock clock = NowSeconds);

  // Takes a slot and `tokens` at once if the limits allow: returns 0. Else
  // returns the seconds until the time-based limits would allow it, or
  // infinity when only a free concurrency slot is missing. Ignores the queue.
  double TryAcquire(int64_t tokens);
  // Calls `granted` once a slot and the tokens are taken, in arrival order.
  // `granted` may run inline, from Release() on another thread, or from
  // `schedule`.
  void Acquire(int64_t tokens, std::function<void()> granted, Scheduler schedule);
  // Frees the slot; corrects the token count from the estimate to the actual
  // use (when actual_tokens >= 0).
  void Release(int64_t estimated_tokens, int64_t actual_tokens);

  int in_use() const;
  size_t waiting() const;
  const RateLimits& limits() const { return limits_; }

 private:
  RateLimiter(RateLimits limits, Clock clock);
  double TryLocked(int64_t tokens, double now);
  void Refill(double now);
  void Pump(bool from_timer);

  struct Waiter {
    int64_t tokens;
    std::function<void()> granted;
    Scheduler schedule;
  };
  const RateLimits limits_;
  Clock clock_;
  mutable std::mutex mu_;
  int in_use_ = 0;
  double req_level_, tok_level_;  // token buckets, refilled continuously
  double last_refill_;
  std::deque<Waiter> queue_;
  bool pump_scheduled_ = false;
};

}  // namespace ax::llm
