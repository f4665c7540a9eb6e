// The timing rules on their own: which figure counts and when the clocks
// overrule the candidate's events.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "judge/timing_rules.h"

namespace ax {
namespace {

bool Has(const TimingDecision& d, const std::string& f) {
  return std::find(d.flags.begin(), d.flags.end(), f) != d.flags.end();
}

// n calls of an honest candidate: events, a little launch overhead on the
// worker's clock, and a request that took the calls plus `overhead_ms`.
TimingReport Honest(double ms, int n, double overhead_ms = 40.0) {
  TimingReport r;
  for (int i = 0; i < n; ++i) {
    r.stream_ms.push_back(ms);
    r.device_ms.push_back(ms + 0.004);
    r.host_ms.push_back(ms + 0.03);
  }
  r.request_ms = overhead_ms + n * (ms + 0.05);
  return r;
}

const EagerTiming kEager{1.0, 40.0 + 60 * 1.05, 0.004};

TEST(TimingRules, HonestCandidateKeepsItsStreamMedian) {
  TimingDecision d = DecideTiming(Honest(0.5, 60), true, 60, kEager);
  EXPECT_TRUE(d.flags.empty());
  EXPECT_FALSE(d.rejected);
  EXPECT_DOUBLE_EQ(d.runtime_ms, 0.5);
  EXPECT_EQ(d.used.n, 60u);
  ASSERT_TRUE(d.host_ms.has_value());
  EXPECT_NEAR(*d.host_ms, 0.5, 0.01);
}

TEST(TimingRules, WorkLeftOnOtherStreamsCountsTheDeviceWideFigure) {
  TimingReport r = Honest(0.1, 60);
  for (auto& x : r.device_ms) x = 2.0;  // the device-wide sync waited for side-stream work
  for (auto& x : r.host_ms) x = 2.05;
  r.request_ms = 40.0 + 60 * 2.1;
  TimingDecision d = DecideTiming(r, true, 60, kEager);
  EXPECT_TRUE(Has(d, "side_stream_work"));
  EXPECT_DOUBLE_EQ(d.runtime_ms, 2.0);
  EXPECT_DOUBLE_EQ(d.used.median, 2.0);
  EXPECT_FALSE(Has(d, "timing_inconsistent"));
}

TEST(TimingRules, EventsFarBelowTheWorkersClockAreReplacedByIt) {
  TimingReport r = Honest(0.01, 60);
  for (auto& x : r.host_ms) x = 3.0;  // the calls really took 3 ms each
  r.request_ms = 40.0 + 60 * 3.0;
  TimingDecision d = DecideTiming(r, true, 60, kEager);
  EXPECT_TRUE(Has(d, "timing_inconsistent"));
  EXPECT_DOUBLE_EQ(d.runtime_ms, 3.0);
  EXPECT_FALSE(d.rejected);
}

TEST(TimingRules, OneSchedulingStallDoesNotFlagAShortKernel) {
  // 0.05 ms calls against a 0.06 ms eager loop, but the request stalled
  // once for 60 ms: 1 ms per call on a naive estimate.
  EagerTiming fast{0.06, 40.0 + 60 * 0.11, 0.004};
  TimingDecision d = DecideTiming(Honest(0.05, 60, 100.0), true, 60, fast);
  EXPECT_FALSE(Has(d, "timing_inconsistent"));
  EXPECT_DOUBLE_EQ(d.runtime_ms, 0.05);
}

TEST(TimingRules, CandidateMuchFasterThanEagerIsNotFlagged) {
  // 0.1 ms against eager's 1.0 ms, both loops consistent with their events.
  TimingDecision d = DecideTiming(Honest(0.1, 60), true, 60, kEager);
  EXPECT_TRUE(d.flags.empty());
  EXPECT_DOUBLE_EQ(d.runtime_ms, 0.1);
  EXPECT_NEAR(*d.host_ms, 0.1, 0.01);
}

TEST(TimingRules, ParentsClockFarBeyondTheSlackOverrulesTheEvents) {
  // Events and the worker's clock both claim 0.1 ms (both forged, say), but
  // the request took 10 ms per call on the parent's clock.
  TimingReport r = Honest(0.1, 60);
  r.request_ms = 40.0 + 60 * 10.0;
  TimingDecision d = DecideTiming(r, true, 60, kEager);
  EXPECT_TRUE(Has(d, "timing_inconsistent"));
  EXPECT_GT(d.runtime_ms, 5.0);
  EXPECT_FALSE(d.rejected);
}

TEST(TimingRules, ReportedTimesLongerThanTheRequestAreRejected) {
  TimingReport r = Honest(5.0, 60);
  r.request_ms = 50.0;  // 60 calls of 5 ms cannot fit in 50 ms
  TimingDecision d = DecideTiming(r, true, 60, kEager);
  EXPECT_TRUE(d.rejected);
  EXPECT_TRUE(Has(d, "timing_inconsistent"));
  EXPECT_NE(d.error.find("forged"), std::string::npos);
}

TEST(TimingRules, OneOffCostsInTheBaselinesWallDoNotRejectAnHonestCandidate) {
  // The eager loop's wall time included a slow first call (lazy loading):
  // the candidate's request is much shorter than the baseline's, honestly.
  EagerTiming slow{0.3, 600.0, 0.004};
  TimingDecision d = DecideTiming(Honest(0.25, 60, 10.0), true, 60, slow);
  EXPECT_FALSE(d.rejected);
  EXPECT_TRUE(d.flags.empty());
}

TEST(TimingRules, CpuUsesTheWorkersClockWithoutEventRules) {
  TimingReport r = Honest(2.0, 5);
  r.host_ms = r.stream_ms;
  TimingDecision d = DecideTiming(r, false, 5, std::nullopt);
  EXPECT_TRUE(d.flags.empty());
  EXPECT_DOUBLE_EQ(d.runtime_ms, 2.0);
  EXPECT_FALSE(d.host_ms.has_value());
}

TEST(TimingRules, GpuTimesAreTheMedianOfTheProfiledCalls) {
  EXPECT_DOUBLE_EQ(*GpuTimeMedian({0.13, 0.12, 0.50}), 0.13);  // one slow call does not count
  EXPECT_DOUBLE_EQ(*GpuTimeMedian({2.0}), 2.0);
  EXPECT_FALSE(GpuTimeMedian({}).has_value());
  EXPECT_FALSE(GpuTimeMedian({0.1, -1.0, 0.1}).has_value());
  EXPECT_FALSE(GpuTimeMedian({0.1, std::nan(""), 0.1}).has_value());
  EXPECT_FALSE(GpuTimeMedian(std::vector<double>(17, 0.1)).has_value());
}

}  // namespace
}  // namespace ax
