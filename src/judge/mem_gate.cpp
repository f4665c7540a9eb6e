#include "judge/mem_gate.h"

#include <chrono>

namespace ax {

void MemGate::SetBudget(int64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  budget_ = bytes > 0 ? bytes : 0;
  cv_.notify_all();
}

int64_t MemGate::budget() const {
  std::lock_guard<std::mutex> l(mu_);
  return budget_;
}

double MemGate::Acquire(int64_t bytes, bool alone, int* holders_after) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t ticket = next_ticket_++;
  cv_.wait(l, [&] {
    if (ticket != serving_) return false;  // first come, first served
    if (alone_held_) return false;
    if (holders_ == 0) return true;
    if (alone) return false;
    return budget_ == 0 || reserved_ + bytes <= budget_;
  });
  ++serving_;
  ++holders_;
  reserved_ += bytes;
  if (alone) alone_held_ = true;
  ++admitted_;
  if (holders_after) *holders_after = holders_;
  cv_.notify_all();  // the next ticket may fit too
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void MemGate::Release(int64_t bytes, bool alone) {
  std::lock_guard<std::mutex> l(mu_);
  --holders_;
  reserved_ -= bytes;
  if (alone) alone_held_ = false;
  cv_.notify_all();
}

int64_t MemGate::reserved() const {
  std::lock_guard<std::mutex> l(mu_);
  return reserved_;
}

uint64_t MemGate::admitted() const {
  std::lock_guard<std::mutex> l(mu_);
  return admitted_;
}

int MemGate::holders() const {
  std::lock_guard<std::mutex> l(mu_);
  return holders_;
}

}  // namespace ax
