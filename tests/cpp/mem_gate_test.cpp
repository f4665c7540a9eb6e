// The pool's device memory admission: who fits, who waits, in which order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "judge/mem_gate.h"

namespace ax {
namespace {

using namespace std::chrono_literals;

TEST(MemGate, ReservationsThatFitRunTogether) {
  MemGate g;
  g.SetBudget(100);
  MemReservation a(&g, 40, false), b(&g, 60, false);
  EXPECT_EQ(g.reserved(), 100);
  EXPECT_EQ(g.holders(), 2);
  b.Reset();
  a.Reset();
  EXPECT_EQ(g.reserved(), 0);
  EXPECT_EQ(g.holders(), 0);
}

TEST(MemGate, OneThatDoesNotFitWaitsForARelease) {
  MemGate g;
  g.SetBudget(100);
  auto a = std::make_unique<MemReservation>(&g, 70, false);
  std::atomic<bool> admitted{false};
  std::thread t([&] {
    MemReservation b(&g, 50, false);
    admitted = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(admitted.load());
  a.reset();
  t.join();
  EXPECT_TRUE(admitted.load());
  EXPECT_EQ(g.reserved(), 0);
}

TEST(MemGate, LargerThanTheBudgetRunsOnceTheDeviceIsEmpty) {
  MemGate g;
  g.SetBudget(100);
  MemReservation huge(&g, 500, false);  // nothing else held: admitted at once
  EXPECT_EQ(g.holders(), 1);
  std::atomic<bool> admitted{false};
  std::thread t([&] {
    MemReservation small(&g, 1, false);
    admitted = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(admitted.load());  // the huge one runs alone
  huge.Reset();
  t.join();
  EXPECT_TRUE(admitted.load());
}

TEST(MemGate, FirstComeFirstServedSoALargeOneIsNotOvertaken) {
  MemGate g;
  g.SetBudget(100);
  auto first = std::make_unique<MemReservation>(&g, 60, false);
  std::vector<int> order;
  std::mutex mu;
  std::thread big([&] {
    MemReservation r(&g, 90, false);
    std::lock_guard<std::mutex> l(mu);
    order.push_back(90);
  });
  std::this_thread::sleep_for(100ms);  // the big one is queued first
  std::thread small([&] {
    MemReservation r(&g, 20, false);  // would fit now, but waits its turn (and not next to the big one)
    std::lock_guard<std::mutex> l(mu);
    order.push_back(20);
  });
  std::this_thread::sleep_for(100ms);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_TRUE(order.empty());
  }
  first.reset();
  big.join();
  small.join();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], 90);
}

TEST(MemGate, AloneWaitsForEveryoneAndKeepsOthersOut) {
  MemGate g;
  g.SetBudget(100);
  auto a = std::make_unique<MemReservation>(&g, 10, false);
  std::atomic<int> stage{0};
  std::thread alone([&] {
    MemReservation r(&g, 10, true);
    stage = 1;
    std::this_thread::sleep_for(150ms);
    stage = 2;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(stage.load(), 0);  // a still holds its reservation
  a.reset();
  while (stage.load() == 0) std::this_thread::sleep_for(5ms);
  MemReservation after(&g, 10, false);  // admitted only when the alone one is done
  EXPECT_EQ(stage.load(), 2);
  alone.join();
}

TEST(MemGate, AReservationKnowsWhetherItSharedTheDevice) {
  MemGate g;
  g.SetBudget(100);
  {
    MemReservation a(&g, 10, false);
    EXPECT_FALSE(a.shared_with_others());
  }
  MemReservation a(&g, 10, false);
  {
    MemReservation b(&g, 10, false);  // arrives later, leaves early
    EXPECT_TRUE(b.shared_with_others());
  }
  EXPECT_TRUE(a.shared_with_others());
}

TEST(MemGate, ZeroBudgetAdmitsEveryone) {
  MemGate g;
  MemReservation a(&g, 1LL << 40, false), b(&g, 1LL << 40, false);
  EXPECT_EQ(g.holders(), 2);
}

}  // namespace
}  // namespace ax
