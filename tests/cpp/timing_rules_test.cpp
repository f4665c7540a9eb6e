// The timing rules on their own: which figure counts, which timed call is
// checked, and when the candidate's reported times disagree with a clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "judge/timing_rules.h"

namespace ax {
namespace {

bool Has(const TimingDecision& d, const std::string& f) {
  return std::find(d.flags.begin(), d.flags.end(), f) != d.flags.end();
}

constexpr int kWarmup = 10, kIters = 50, kCalls = kWarmup + kIters;
constexpr double kLoopMs = 12.0;  // what the timing loop costs around the calls, per request

// A GPU timing request of an honest candidate whose calls take `ms`: events,
// the worker's clock a little above them, and the judge's clock around the
// request: every call plus the loop's cost plus `extra_ms`.
TimingReport Honest(double ms, double extra_ms = 1.0) {
  TimingReport r;
  for (int i = 0; i < kIters; ++i) {
    r.stream_ms.push_back(ms);
    r.device_ms.push_back(ms + 0.004);
    r.host_ms.push_back(ms + 0.03);
  }
  r.request_ms = kLoopMs + kCalls * ms + extra_ms;
  return r;
}

// Every reported figure scaled by `f` (what a wrapped timer does), the
// judge's clock unchanged.
TimingReport Scaled(TimingReport r, double f) {
  for (auto* v : {&r.stream_ms, &r.device_ms, &r.host_ms}) {
    for (auto& x : *v) x *= f;
  }
  return r;
}

// The eager baseline: 1 ms calls in the same loop, in a trusted worker.
const EagerTiming kEager{1.0, kLoopMs + kCalls * 1.0, 0.004};

TimingDecision Gpu(const TimingReport& r, const std::optional<EagerTiming>& e = kEager) {
  return DecideTiming(r, true, kWarmup, kIters, e);
}

TEST(TimingRules, HonestCandidateKeepsItsStreamMedian) {
  TimingDecision d = Gpu(Honest(0.5));
  EXPECT_TRUE(d.flags.empty());
  EXPECT_FALSE(d.rejected);
  EXPECT_DOUBLE_EQ(d.runtime_ms, 0.5);
  EXPECT_EQ(d.used.n, 50u);
  ASSERT_TRUE(d.host_ms.has_value());
  EXPECT_NEAR(*d.host_ms, 0.5, 0.02);  // the judge's clock per call, the loop's cost taken off
}

TEST(TimingRules, WorkLeftOnOtherStreamsCountsTheDeviceWideFigure) {
  TimingReport r = Honest(0.1);
  for (auto& x : r.device_ms) x = 2.0;  // the device-wide sync waited for side-stream work
  for (auto& x : r.host_ms) x = 2.05;
  r.request_ms = kLoopMs + kCalls * 2.1;
  TimingDecision d = Gpu(r);
  EXPECT_TRUE(Has(d, "side_stream_work"));
  EXPECT_DOUBLE_EQ(d.runtime_ms, 2.0);
  EXPECT_DOUBLE_EQ(d.used.median, 2.0);
  EXPECT_FALSE(d.rejected);
}

TEST(TimingRules, TimesWrappedToHalfAreRejected) {
  // A timer whose methods were wrapped to halve every figure it reports:
  // events and the worker's clock agree with each other, not with the judge.
  TimingDecision d = Gpu(Scaled(Honest(1.0), 0.5));
  EXPECT_TRUE(d.rejected);
  EXPECT_TRUE(d.clock_disagrees);
  EXPECT_TRUE(Has(d, "timing_forged"));
  EXPECT_NE(d.error.find("disagree with the judge's clock"), std::string::npos) << d.error;
  EXPECT_NEAR(*d.host_ms, 1.0, 0.02);
  EXPECT_TRUE(Gpu(Scaled(Honest(1.0), 0.3)).rejected);
  EXPECT_TRUE(Gpu(Scaled(Honest(1.5), 0.5)).rejected);
}

TEST(TimingRules, TheBoundIsTenPercentPlusTheAllowance) {
  // 10 ms calls claimed 15% faster: beyond 10% plus 24.2 ms over 60 calls
  // (20 ms, 0.05 ms per call and a tenth of the loop's 12 ms).
  EXPECT_TRUE(Gpu(Scaled(Honest(10.0), 0.85)).rejected);
  // 5% faster: inside it, like an honest candidate's scatter.
  EXPECT_FALSE(Gpu(Scaled(Honest(10.0), 0.95)).rejected);
  // The allowance is absolute: on 0.1 ms calls (6 ms over the request) it
  // is most of the bound, so the bound rejects halving but not 15% there.
  EXPECT_FALSE(Gpu(Scaled(Honest(0.1), 0.85)).rejected);
  const ClockBound b = ClockBoundFor(true);
  EXPECT_DOUBLE_EQ(b.rel, 0.10);
  // At the edge: the request's calls exactly 10% plus the allowance above the claim.
  TimingReport edge = Honest(1.0, 0.0);
  edge.request_ms = kLoopMs + 1.1 * kCalls * 1.0 + b.Allowance(kCalls, kLoopMs);
  EXPECT_FALSE(Gpu(edge).rejected);
  edge.request_ms += 0.5;
  EXPECT_TRUE(Gpu(edge).rejected);
}

TEST(TimingRules, OneSchedulingStallIsLeftForASecondMeasurement) {
  // 0.05 ms calls, but the request stalled once for 60 ms: the judge's clock
  // disagrees, and says so, so that the judge measures once more.
  TimingDecision d = Gpu(Honest(0.05, 60.0));
  EXPECT_TRUE(d.rejected);
  EXPECT_TRUE(d.clock_disagrees);
  // A few milliseconds of scatter do not.
  EXPECT_FALSE(Gpu(Honest(0.05, 4.0)).rejected);
}

TEST(TimingRules, TheLoopTimedJustBeforeStandsForItsCost) {
  // The machine got busier since the eager baseline was timed: the loop now
  // costs five times as much. Against the baseline's loop an honest
  // candidate would look forged; against the null model's loop, timed just
  // before on the same seeds, it does not.
  TimingReport busy = Honest(1.5);
  busy.request_ms += 4 * kLoopMs;
  EXPECT_TRUE(Gpu(busy).rejected);
  EXPECT_FALSE(DecideTiming(busy, true, kWarmup, kIters, kEager, 5 * kLoopMs).rejected);
  EXPECT_NEAR(*DecideTiming(busy, true, kWarmup, kIters, kEager, 5 * kLoopMs + 1.0).host_ms, 1.5, 0.01);
  // Halved times are rejected all the same, with or without an eager baseline.
  TimingReport forged = Scaled(busy, 0.5);
  EXPECT_TRUE(DecideTiming(forged, true, kWarmup, kIters, kEager, 5 * kLoopMs).rejected);
  EXPECT_TRUE(DecideTiming(forged, true, kWarmup, kIters, std::nullopt, 5 * kLoopMs).rejected);
}

TEST(TimingRules, EventsFarBelowTheWorkersClockAreRejected) {
  // Only the events were replaced (elapsed_time): the worker's clock still
  // sees 3 ms calls.
  TimingReport r = Honest(3.0);
  for (auto& x : r.stream_ms) x = 0.01;
  for (auto& x : r.device_ms) x = 0.012;
  TimingDecision d = Gpu(r);
  EXPECT_TRUE(d.rejected);
  EXPECT_FALSE(d.clock_disagrees);  // a clock of the same request: measuring again would not help
  EXPECT_TRUE(Has(d, "timing_forged"));
  EXPECT_NE(d.error.find("worker's clock"), std::string::npos);
}

TEST(TimingRules, ShortKernelsKeepTheirEventsUnderTheWorkersSynchronisations) {
  TimingReport r = Honest(0.005);
  for (auto& x : r.host_ms) x = 0.06;  // two synchronisations and an event record per call
  EXPECT_FALSE(Gpu(r).rejected);
}

TEST(TimingRules, GpuTimingTakesTheQueuedSpinOffTheWorkersClock) {
  // Each call queued behind a 1 ms spin: the worker's clock covers the spin,
  // the events only the call.
  TimingReport r = Honest(0.005);
  for (auto& x : r.host_ms) x = 1.06;
  EXPECT_TRUE(Gpu(r).rejected);  // the spin not reported: the events look forged
  r.spin_ms.assign(kIters, 1.0);
  TimingDecision d = Gpu(r);
  EXPECT_FALSE(d.rejected) << d.error;
  EXPECT_DOUBLE_EQ(d.runtime_ms, 0.005);
  // Events replaced under GPU timing are still found.
  for (auto& x : r.host_ms) x = 4.0;
  EXPECT_TRUE(Gpu(r).rejected);
  // One spin figure per timed call, finite and not negative.
  r = Honest(0.005);
  r.spin_ms.assign(kIters - 1, 1.0);
  EXPECT_NE(Gpu(r).error.find("spin"), std::string::npos);
  r.spin_ms.assign(kIters, -1.0);
  EXPECT_TRUE(Gpu(r).rejected);
}

TEST(TimingRules, CandidateMuchFasterThanEagerIsNotFlagged) {
  TimingDecision d = Gpu(Honest(0.1));
  EXPECT_TRUE(d.flags.empty());
  EXPECT_DOUBLE_EQ(d.runtime_ms, 0.1);
  EXPECT_NEAR(*d.host_ms, 0.1, 0.02);
}

TEST(TimingRules, ReportedTimesLongerThanTheRequestAreRejected) {
  TimingReport r = Honest(5.0);
  r.request_ms = 50.0;  // 50 calls of 5 ms cannot fit in 50 ms
  TimingDecision d = Gpu(r);
  EXPECT_TRUE(d.rejected);
  EXPECT_FALSE(d.clock_disagrees);
  EXPECT_TRUE(Has(d, "timing_forged"));
  EXPECT_NE(d.error.find("forged"), std::string::npos);
}

TEST(TimingRules, AReplyWithoutOneFigurePerTimedCallIsRejected) {
  TimingReport r = Honest(1.0);
  r.stream_ms.resize(5);  // five figures for fifty calls
  EXPECT_TRUE(Gpu(r).rejected);
  r = Honest(1.0);
  r.host_ms[3] = std::nan("");
  EXPECT_TRUE(Gpu(r).rejected);
  r = Honest(1.0);
  r.device_ms[0] = -1.0;
  TimingDecision d = Gpu(r);
  EXPECT_TRUE(d.rejected);
  EXPECT_TRUE(Has(d, "timing_forged"));
}

TEST(TimingRules, OneOffCostsInTheBaselinesWallDoNotRejectAnHonestCandidate) {
  // The eager loop's wall time included a slow first call (lazy loading):
  // the candidate's request is much shorter than the baseline's, honestly.
  EagerTiming slow{0.3, 600.0, 0.004};
  TimingDecision d = Gpu(Honest(0.25), slow);
  EXPECT_FALSE(d.rejected);
  EXPECT_TRUE(d.flags.empty());
}

TEST(TimingRules, WithoutALoopMeasureOnlyTheRequestBoundsTheClaim) {
  TimingDecision d = Gpu(Scaled(Honest(1.0), 0.5), std::nullopt);
  EXPECT_FALSE(d.rejected);
  EXPECT_FALSE(d.host_ms.has_value());
}

// CPU: every figure is the worker's clock; the eager baseline's loop gives
// the loop's cost as on a GPU.
TimingReport Cpu(double ms, int warmup, int iters, double loop_ms) {
  TimingReport r;
  for (int i = 0; i < iters; ++i) {
    r.stream_ms.push_back(ms);
    r.device_ms.push_back(ms);
    r.host_ms.push_back(ms);
  }
  r.request_ms = loop_ms + (warmup + iters) * ms;
  return r;
}

TEST(TimingRules, CpuChecksTheWorkersClockAgainstTheJudges) {
  const EagerTiming eager{0.4, 25.0 + 4 * 0.4, 0.0};
  TimingDecision d = DecideTiming(Cpu(120.0, 1, 3, 25.0), false, 1, 3, eager);
  EXPECT_TRUE(d.flags.empty());
  EXPECT_DOUBLE_EQ(d.runtime_ms, 120.0);
  // The Triton interpreter's calls scatter: a request a third longer than
  // its median says is within the CPU's bound.
  TimingReport slow = Cpu(120.0, 1, 3, 25.0);
  slow.request_ms += 0.33 * 480.0;
  EXPECT_FALSE(DecideTiming(slow, false, 1, 3, eager).rejected);
  // Halved times are not.
  TimingDecision forged = DecideTiming(Scaled(Cpu(120.0, 1, 3, 25.0), 0.5), false, 1, 3, eager);
  EXPECT_TRUE(forged.rejected);
  EXPECT_TRUE(Has(forged, "timing_forged"));
  EXPECT_FALSE(Has(forged, "side_stream_work"));
}

TEST(TimingRules, TheCheckedCallIsTheLastToReuseAnInputSet) {
  // Three sets. Warm-up 10 uses all three: the last timed call repeats one.
  EXPECT_EQ(CheckedCall(10, 50, 3), 49);
  // The CPU's defaults: warm-up on sets 0 and 1; timed calls 0..4 on sets
  // 0, 1, 2, 0, 1: call 4 repeats set 1.
  EXPECT_EQ(CheckedCall(2, 5, 3), 4);
  // The corpus's settings: warm-up on set 0; calls 0, 1, 2 on sets 0, 1, 2.
  EXPECT_EQ(CheckedCall(1, 3, 3), 0);
  // No warm-up, three calls on three sets: none repeats; the last one.
  EXPECT_EQ(CheckedCall(0, 3, 3), 2);
  EXPECT_EQ(CheckedCall(0, 5, 3), 4);
  EXPECT_EQ(CheckedCall(0, 4, 3), 3);
  EXPECT_EQ(CheckedCall(1, 1, 3), 0);
  EXPECT_EQ(CheckedCall(3, 7, 1), 6);
  EXPECT_EQ(CheckedCall(2, 0, 3), -1);
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
