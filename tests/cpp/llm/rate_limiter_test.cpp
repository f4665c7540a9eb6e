// The run-wide rate limiter, on a fake clock and through real clients.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <limits>

#include "common/util.h"
#include "fake_server.h"
#include "llm/rate_limiter.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

struct FakeClock {
  double now = 1000;
  RateLimiter::Clock fn() {
    return [this] { return now; };
  }
};

TEST(RateLimiter, ConcurrencyLimit) {
  FakeClock clk;
  auto rl = RateLimiter::Create({2, 0, 0}, clk.fn());
  EXPECT_EQ(rl->TryAcquire(10), 0);
  EXPECT_EQ(rl->TryAcquire(10), 0);
  EXPECT_TRUE(std::isinf(rl->TryAcquire(10)));
  rl->Release(10, 10);
  EXPECT_EQ(rl->TryAcquire(10), 0);
  EXPECT_EQ(rl->in_use(), 2);
}

TEST(RateLimiter, RequestsPerMinuteRefillsOverTime) {
  FakeClock clk;
  auto rl = RateLimiter::Create({0, 60, 0}, clk.fn());  // one a second, burst 60
  for (int i = 0; i < 60; i++) {
    ASSERT_EQ(rl->TryAcquire(1), 0) << i;
    rl->Release(1, 1);
  }
  double wait = rl->TryAcquire(1);
  EXPECT_NEAR(wait, 1.0, 1e-9);
  clk.now += 0.5;
  EXPECT_NEAR(rl->TryAcquire(1), 0.5, 1e-9);
  clk.now += 0.5;
  EXPECT_EQ(rl->TryAcquire(1), 0);
}

TEST(RateLimiter, TokensPerMinuteWithCorrection) {
  FakeClock clk;
  auto rl = RateLimiter::Create({0, 0, 6000}, clk.fn());  // 100 tokens a second
  EXPECT_EQ(rl->TryAcquire(5000), 0);
  // 1000 left; a 3000-token call waits for 2000 more = 20 s.
  EXPECT_NEAR(rl->TryAcquire(3000), 20.0, 1e-9);
  // The first call really used only 1000 tokens: 4000 come back.
  rl->Release(5000, 1000);
  EXPECT_EQ(rl->TryAcquire(3000), 0);
  // A call larger than a minute's allowance waits for a full bucket, not forever.
  clk.now += 1000;
  EXPECT_EQ(rl->TryAcquire(1000000), 0);
}

TEST(RateLimiter, QueueIsFifoAndWakesOnRelease) {
  FakeClock clk;
  auto rl = RateLimiter::Create({1, 0, 0}, clk.fn());
  std::vector<int> order;
  auto never = [](double, std::function<void()>) { FAIL() << "no timer expected"; };
  rl->Acquire(1, [&] { order.push_back(0); }, never);
  rl->Acquire(1, [&] { order.push_back(1); }, never);
  rl->Acquire(1, [&] { order.push_back(2); }, never);
  EXPECT_EQ(order, std::vector<int>({0}));
  EXPECT_EQ(rl->waiting(), 2u);
  rl->Release(1, 1);
  EXPECT_EQ(order, std::vector<int>({0, 1}));
  rl->Release(1, 1);
  EXPECT_EQ(order, std::vector<int>({0, 1, 2}));
  EXPECT_EQ(rl->waiting(), 0u);
}

TEST(RateLimiter, TimeBasedWaitSchedulesAWakeUp) {
  FakeClock clk;
  auto rl = RateLimiter::Create({0, 60, 0}, clk.fn());
  for (int i = 0; i < 60; i++) ASSERT_EQ(rl->TryAcquire(1), 0);
  std::vector<std::pair<double, std::function<void()>>> timers;
  auto sched = [&](double d, std::function<void()> fn) { timers.push_back({d, std::move(fn)}); };
  bool granted = false;
  rl->Acquire(1, [&] { granted = true; }, sched);
  ASSERT_EQ(timers.size(), 1u);
  EXPECT_NEAR(timers[0].first, 1.0, 1e-9);
  EXPECT_FALSE(granted);
  clk.now += 1.0;
  timers[0].second();
  EXPECT_TRUE(granted);
}

TEST(RateLimiter, SharedLimitHoldsAcrossClientsOfARun) {
  FakeServer server;
  server.SetDefault([](const Seen&) {
    Action a = Ok(OpenAiReply("ok"));
    a.delay_s = 0.05;
    return a;
  });
  RunServices svc;
  svc.loop = std::make_shared<HttpLoop>();
  svc.limiter = RateLimiter::Create({3, 0, 0});
  auto cfg = FastConfig({{"OPENAI_API_KEY", "k1"}, {"ANTHROPIC_API_KEY", "k2"}}, server.url() + "/v1");
  auto a = MustMake("openai:m1", cfg, svc);
  auto b = MustMake("compat:m2@" + server.url() + "/v1", cfg, svc);
  std::vector<std::future<ChatResult>> futs;
  for (int i = 0; i < 8; i++) {
    futs.push_back(a->Chat(Ask("a")));
    futs.push_back(b->Chat(Ask("b")));
  }
  for (auto& f : futs) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(server.hits(), 16u);
  EXPECT_LE(server.max_concurrent(), 3);
  EXPECT_GE(server.max_concurrent(), 2);
  EXPECT_EQ(svc.limiter->in_use(), 0);
}

TEST(RateLimiter, RequestsPerMinuteSpacesRealCalls) {
  FakeServer server;
  server.SetDefault([](const Seen&) { return Ok(OpenAiReply("ok")); });
  RunServices svc;
  // 600 a minute = one every 0.1 s once the 2-call burst... start from empty:
  svc.limiter = RateLimiter::Create({0, 600, 0});
  for (int i = 0; i < 600; i++) ASSERT_EQ(svc.limiter->TryAcquire(0), 0);
  for (int i = 0; i < 600; i++) svc.limiter->Release(0, 0);
  auto c = MustMake("openai:m", FastConfig({{"OPENAI_API_KEY", "k"}}, server.url() + "/v1"), svc);
  double t0 = NowSeconds();
  std::vector<std::future<ChatResult>> futs;
  for (int i = 0; i < 4; i++) futs.push_back(c->Chat(Ask("x")));
  for (auto& f : futs) ASSERT_TRUE(f.get().ok());
  // Four calls from an empty bucket at 10 a second take about 0.4 s.
  EXPECT_GE(NowSeconds() - t0, 0.35);
  auto seen = server.seen();
  EXPECT_GE(seen[3].at - seen[0].at, 0.25);
}

}  // namespace
}  // namespace ax::llm
