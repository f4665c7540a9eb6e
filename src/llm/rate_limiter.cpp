#include "llm/rate_limiter.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace ax::llm {

std::shared_ptr<RateLimiter> RateLimiter::Create(RateLimits limits, Clock clock) {
  return std::shared_ptr<RateLimiter>(new RateLimiter(limits, std::move(clock)));
}

RateLimiter::RateLimiter(RateLimits limits, Clock clock)
    : limits_(limits), clock_(std::move(clock)) {
  // Buckets start full: a run may spend one minute's allowance at once.
  req_level_ = limits_.requests_per_minute;
  tok_level_ = limits_.tokens_per_minute;
  last_refill_ = clock_();
}

void RateLimiter::Refill(double now) {
  double dt = std::max(0.0, now - last_refill_);
  last_refill_ = now;
  if (limits_.requests_per_minute > 0)
    req_level_ = std::min(limits_.requests_per_minute,
                          req_level_ + dt * limits_.requests_per_minute / 60.0);
  if (limits_.tokens_per_minute > 0)
    tok_level_ = std::min(limits_.tokens_per_minute,
                          tok_level_ + dt * limits_.tokens_per_minute / 60.0);
}

double RateLimiter::TryLocked(int64_t tokens, double now) {
  Refill(now);
  if (limits_.max_concurrency > 0 && in_use_ >= limits_.max_concurrency)
    return std::numeric_limits<double>::infinity();
  double wait = 0;
  if (limits_.requests_per_minute > 0 && req_level_ < 1.0)
    wait = (1.0 - req_level_) * 60.0 / limits_.requests_per_minute;
  // A call larger than a whole minute's allowance waits for a full bucket
  // rather than forever.
  double need = 0;
  if (limits_.tokens_per_minute > 0) {
    need = std::min<double>(double(tokens), limits_.tokens_per_minute);
    if (tok_level_ < need)
      wait = std::max(wait, (need - tok_level_) * 60.0 / limits_.tokens_per_minute);
  }
  if (wait > 0) return std::max(wait, 1e-3);
  in_use_++;
  if (limits_.requests_per_minute > 0) req_level_ -= 1.0;
  if (limits_.tokens_per_minute > 0) tok_level_ -= need;
  return 0;
}

double RateLimiter::TryAcquire(int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  return TryLocked(tokens, clock_());
}

void RateLimiter::Acquire(int64_t tokens, std::function<void()> granted, Scheduler schedule) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) {
      double r = TryLocked(tokens, clock_());
      if (r != 0) {
        queue_.push_back(Waiter{tokens, std::move(granted), schedule});
        granted = nullptr;
        if (r != std::numeric_limits<double>::infinity() && !pump_scheduled_) {
          pump_scheduled_ = true;
          std::weak_ptr<RateLimiter> weak = weak_from_this();
          schedule(r, [weak] {
            if (auto self = weak.lock()) self->Pump(true);
          });
        }
      }
    } else {
      queue_.push_back(Waiter{tokens, std::move(granted), std::move(schedule)});
      granted = nullptr;
    }
  }
  if (granted) granted();
}

void RateLimiter::Pump(bool from_timer) {
  std::vector<std::function<void()>> run;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (from_timer) pump_scheduled_ = false;
    double now = clock_();
    while (!queue_.empty()) {
      double r = TryLocked(queue_.front().tokens, now);
      if (r == 0) {
        run.push_back(std::move(queue_.front().granted));
        queue_.pop_front();
        continue;
      }
      if (r != std::numeric_limits<double>::infinity() && !pump_scheduled_) {
        pump_scheduled_ = true;
        std::weak_ptr<RateLimiter> weak = weak_from_this();
        queue_.front().schedule(r, [weak] {
          if (auto self = weak.lock()) self->Pump(true);
        });
      }
      break;
    }
  }
  for (auto& fn : run) fn();
}

void RateLimiter::Release(int64_t estimated_tokens, int64_t actual_tokens) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ = std::max(0, in_use_ - 1);
    if (limits_.tokens_per_minute > 0 && actual_tokens >= 0) {
      double est = std::min<double>(double(estimated_tokens), limits_.tokens_per_minute);
      tok_level_ -= double(actual_tokens) - est;
      tok_level_ = std::min(tok_level_, limits_.tokens_per_minute);
    }
  }
  Pump(false);
}

int RateLimiter::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t RateLimiter::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace ax::llm
