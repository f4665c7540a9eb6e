// Device memory admission for the judge pool (docs/judge.md, "The pool").
//
// Candidates that run next to each other on one GPU share its memory. Each
// holds a reservation, sized from its task's measured footprint, for as long
// as it runs; one whose reservation does not fit waits. Admission is first
// come, first served, so a large candidate is not overtaken for ever by small
// ones; a reservation larger than the whole budget is admitted once the device
// is otherwise empty (it runs alone). A budget of 0 turns the gate off.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ax {

class MemGate {
 public:
  void SetBudget(int64_t bytes);
  int64_t budget() const;

  // Blocks until `bytes` fits next to the reservations held now (or nothing
  // else is held); `alone` waits until nothing else is held and keeps others
  // out until Release. Returns the seconds it waited.
  // `holders_after` (optional): how many hold a reservation once it is granted.
  double Acquire(int64_t bytes, bool alone, int* holders_after = nullptr);
  void Release(int64_t bytes, bool alone);

  int64_t reserved() const;
  int holders() const;
  uint64_t admitted() const;  // reservations granted so far

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t budget_ = 0, reserved_ = 0;
  int holders_ = 0;
  bool alone_held_ = false;
  uint64_t next_ticket_ = 0, serving_ = 0, admitted_ = 0;
};

// Holds a reservation for a scope.
class MemReservation {
 public:
  MemReservation() = default;
  MemReservation(MemGate* g, int64_t bytes, bool alone) : g_(g), bytes_(bytes), alone_(alone) {
    int holders = 0;
    waited_ = g_->Acquire(bytes_, alone_, &holders);
    start_ = g_->admitted();
    shared_ = holders > 1;
  }
  ~MemReservation() { Reset(); }
  MemReservation(const MemReservation&) = delete;
  MemReservation& operator=(const MemReservation&) = delete;
  void Reset() {
    if (g_) g_->Release(bytes_, alone_);
    g_ = nullptr;
  }
  double waited() const { return waited_; }
  // Whether another reservation was held at any time next to this one.
  bool shared_with_others() const { return shared_ || (g_ && (g_->admitted() > start_ || g_->holders() > 1)); }

 private:
  MemGate* g_ = nullptr;
  int64_t bytes_ = 0;
  bool alone_ = false;
  double waited_ = 0;
  uint64_t start_ = 0;
  bool shared_ = false;
};

}  // namespace ax
