// Metrics on hand-computed cases: clamping, degenerate tasks, missing
// results, untimed kernels, empty runs, the scaling curve.
#include "report/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ax::report {
namespace {

TaskOutcome T(const std::string& name, bool correct, std::optional<double> eager, std::optional<double> compile,
              bool degenerate = false) {
  TaskOutcome t;
  t.name = name;
  t.correct = correct;
  t.speedup_eager = eager;
  t.speedup_compile = compile;
  t.degenerate = degenerate;
  return t;
}

double Fast(const SpeedupStats& s, double p) {
  for (const auto& [q, f] : s.fast_p)
    if (q == p) return f;
  ADD_FAILURE() << "no fast_" << p;
  return -1;
}

// Four tasks: 2x, 0.5x, 20x (clamped to 10x) and one without a kernel.
std::vector<TaskOutcome> Four(bool third_degenerate = false) {
  return {T("t1", true, 2.0, 1.0), T("t2", true, 0.5, std::nullopt), T("t3", true, 20.0, 4.0, third_degenerate),
          T("t4", false, std::nullopt, std::nullopt)};
}

TEST(Metrics, BasicStatistics) {
  EXPECT_DOUBLE_EQ(GeoMean({2, 8}), 4);
  EXPECT_DOUBLE_EQ(GeoMean({}), 0);
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(Mean({1, 2, 6}), 3);
  EXPECT_DOUBLE_EQ(ClampSpeedup(25), 10);
  EXPECT_DOUBLE_EQ(ClampSpeedup(0.3), 0.3);  // clamped from above only
  EXPECT_DOUBLE_EQ(UserValue(0.3), 1);
  EXPECT_DOUBLE_EQ(UserValue(3), 3);
  EXPECT_DOUBLE_EQ(UserValue(30), 10);
  EXPECT_DOUBLE_EQ(UserValue(std::nullopt), 1);
}

TEST(Metrics, SpeedupsVsEagerClampedWithUnclampedBeside) {
  RunMetrics m = ComputeMetrics(Four());
  const SpeedupStats& e = m.all.eager;
  EXPECT_EQ(m.all.tasks, 4);
  EXPECT_EQ(m.all.correct, 3);
  EXPECT_DOUBLE_EQ(m.all.correctness, 0.75);
  EXPECT_EQ(e.timed, 3);
  EXPECT_EQ(e.clamped, 1);
  EXPECT_NEAR(e.geomean, std::cbrt(2 * 0.5 * 10), 1e-12);  // 2.1544
  EXPECT_DOUBLE_EQ(e.median, 2);
  EXPECT_NEAR(e.mean, (2 + 0.5 + 10) / 3.0, 1e-12);
  EXPECT_NEAR(e.geomean_unclamped, std::cbrt(20.0), 1e-12);
  EXPECT_DOUBLE_EQ(e.median_unclamped, 2);
  EXPECT_NEAR(e.mean_unclamped, 7.5, 1e-12);
  // User score: 2, 1 (0.5 floored), 10 (clamped), 1 (no kernel).
  EXPECT_NEAR(e.user_score, std::pow(20.0, 0.25), 1e-12);
}

TEST(Metrics, FastPCountsFailuresAndIsStrict) {
  RunMetrics m = ComputeMetrics(Four());
  const SpeedupStats& e = m.all.eager;
  ASSERT_EQ(e.fast_p.size(), 6u);
  EXPECT_DOUBLE_EQ(Fast(e, 0), 0.75);  // every correct, timed kernel; the failure counts against
  EXPECT_DOUBLE_EQ(Fast(e, 0.5), 0.5);  // 0.5 is not strictly above 0.5
  EXPECT_DOUBLE_EQ(Fast(e, 0.8), 0.5);
  EXPECT_DOUBLE_EQ(Fast(e, 1), 0.5);
  EXPECT_DOUBLE_EQ(Fast(e, 1.5), 0.5);
  EXPECT_DOUBLE_EQ(Fast(e, 2), 0.25);  // 2.0 is not strictly above 2
}

TEST(Metrics, CompileBaselineWithMissingMeasurements) {
  RunMetrics m = ComputeMetrics(Four());
  const SpeedupStats& c = m.all.compile;
  EXPECT_EQ(c.timed, 2);  // t2 has no compile figure: left out, not counted as 0 or 1
  EXPECT_DOUBLE_EQ(c.geomean, 2);
  EXPECT_DOUBLE_EQ(c.median, 2.5);
  EXPECT_DOUBLE_EQ(c.mean, 2.5);
  EXPECT_NEAR(c.user_score, std::pow(4.0, 0.25), 1e-12);
  EXPECT_DOUBLE_EQ(Fast(c, 0), 0.5);
  EXPECT_DOUBLE_EQ(Fast(c, 1), 0.25);  // 1.0x is not faster than torch.compile
}

TEST(Metrics, DegenerateTasksExcludedAndCounted) {
  RunMetrics m = ComputeMetrics(Four(/*third_degenerate=*/true));
  EXPECT_EQ(m.degenerate, 1);
  ASSERT_EQ(m.degenerate_tasks.size(), 1u);
  EXPECT_EQ(m.degenerate_tasks[0], "t3");
  // All tasks: unchanged.
  EXPECT_NEAR(m.all.eager.user_score, std::pow(20.0, 0.25), 1e-12);
  // Without t3: 2x, 0.5x, none.
  EXPECT_EQ(m.non_degenerate.tasks, 3);
  EXPECT_EQ(m.non_degenerate.correct, 2);
  EXPECT_NEAR(m.non_degenerate.correctness, 2.0 / 3, 1e-12);
  EXPECT_NEAR(m.non_degenerate.eager.geomean, 1.0, 1e-12);
  EXPECT_EQ(m.non_degenerate.eager.clamped, 0);
  EXPECT_NEAR(m.non_degenerate.eager.user_score, std::cbrt(2.0), 1e-12);
  EXPECT_NEAR(Fast(m.non_degenerate.eager, 1), 1.0 / 3, 1e-12);
}

TEST(Metrics, SpeedupOfAWrongKernelNeverCounts) {
  // A task marked not correct with a speedup (a bad input) is a failure.
  RunMetrics m = ComputeMetrics({T("a", false, 5.0, 5.0), T("b", true, 2.0, std::nullopt)});
  EXPECT_EQ(m.all.correct, 1);
  EXPECT_EQ(m.all.eager.timed, 1);
  EXPECT_DOUBLE_EQ(m.all.eager.geomean, 2);
  EXPECT_NEAR(m.all.eager.user_score, std::sqrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(Fast(m.all.eager, 0), 0.5);
}

TEST(Metrics, UntimedOrNonFiniteSpeedupsAreLeftOut) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  RunMetrics m = ComputeMetrics({T("a", true, std::nullopt, std::nullopt), T("b", true, nan, 0.0),
                                 T("c", true, inf, -1.0), T("d", true, 4.0, std::nullopt)});
  EXPECT_EQ(m.all.correct, 4);
  EXPECT_DOUBLE_EQ(m.all.correctness, 1);
  EXPECT_EQ(m.all.eager.timed, 1);
  EXPECT_DOUBLE_EQ(m.all.eager.geomean, 4);
  EXPECT_NEAR(m.all.eager.user_score, std::pow(4.0, 0.25), 1e-12);
  EXPECT_DOUBLE_EQ(Fast(m.all.eager, 0), 0.25);  // untimed kernels are not "fast"
  EXPECT_EQ(m.all.compile.timed, 0);
  EXPECT_DOUBLE_EQ(m.all.compile.geomean, 0);
  EXPECT_DOUBLE_EQ(m.all.compile.user_score, 1);
}

TEST(Metrics, EmptyRun) {
  RunMetrics m = ComputeMetrics({});
  EXPECT_EQ(m.all.tasks, 0);
  EXPECT_EQ(m.all.correct, 0);
  EXPECT_DOUBLE_EQ(m.all.correctness, 0);
  EXPECT_EQ(m.all.eager.timed, 0);
  EXPECT_DOUBLE_EQ(m.all.eager.geomean, 0);
  EXPECT_DOUBLE_EQ(m.all.eager.user_score, 1);
  for (const auto& [p, f] : m.all.eager.fast_p) EXPECT_DOUBLE_EQ(f, 0) << p;
  EXPECT_TRUE(m.scaling.empty());
  EXPECT_EQ(m.degenerate, 0);
  EXPECT_EQ(m.cost.llm_calls, 0);
}

TEST(Metrics, AllTasksFailed) {
  RunMetrics m = ComputeMetrics({T("a", false, std::nullopt, std::nullopt), T("b", false, std::nullopt, std::nullopt)});
  EXPECT_DOUBLE_EQ(m.all.correctness, 0);
  EXPECT_DOUBLE_EQ(m.all.eager.user_score, 1);
  EXPECT_DOUBLE_EQ(Fast(m.all.eager, 0), 0);
}

TEST(Metrics, ScalingIsTheUserScoreOfTheBestSoFar) {
  TaskOutcome a = T("a", true, 3.0, std::nullopt), b = T("b", true, 0.5, std::nullopt), c = T("c", false, {}, {});
  a.step_speedups = {0, 1.5, 0, 3.0};  // compile error, 1.5x, wrong, 3x
  b.step_speedups = {0.5};             // stopped after one step
  c.step_speedups = {};                // never started
  RunMetrics m = ComputeMetrics({a, b, c});
  ASSERT_EQ(m.scaling.size(), 4u);
  EXPECT_EQ(m.scaling[0].step, 1);
  EXPECT_DOUBLE_EQ(m.scaling[0].user_score, 1);         // 1 (none), 1 (0.5 floored), 1
  EXPECT_NEAR(m.scaling[0].correct_fraction, 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.scaling[1].user_score, std::cbrt(1.5), 1e-12);
  EXPECT_NEAR(m.scaling[1].correct_fraction, 2.0 / 3, 1e-12);
  EXPECT_NEAR(m.scaling[2].user_score, std::cbrt(1.5), 1e-12);  // best so far never drops
  EXPECT_NEAR(m.scaling[3].user_score, std::cbrt(3.0), 1e-12);  // b keeps its final best
  EXPECT_EQ(m.scaling[3].step, 4);
}

TEST(Metrics, ScalingClampsAtTen) {
  TaskOutcome a = T("a", true, 40.0, std::nullopt);
  a.step_speedups = {40.0};
  RunMetrics m = ComputeMetrics({a});
  ASSERT_EQ(m.scaling.size(), 1u);
  EXPECT_DOUBLE_EQ(m.scaling[0].user_score, 10);
}

TEST(Metrics, CostIsSummed) {
  TaskOutcome a = T("a", false, {}, {}), b = T("b", false, {}, {});
  a.cost.llm_calls = 3;
  a.cost.input_tokens = 100;
  a.cost.output_tokens = 10;
  a.cost.usd = 0.25;
  a.cost.wall_s = 5;
  a.cost.judge_s = 2;
  a.cost.judged = 2;
  b.cost = a.cost;
  b.cost.usd = 0.5;
  RunMetrics m = ComputeMetrics({a, b});
  EXPECT_EQ(m.cost.llm_calls, 6);
  EXPECT_EQ(m.cost.input_tokens, 200);
  EXPECT_EQ(m.cost.output_tokens, 20);
  EXPECT_DOUBLE_EQ(m.cost.usd, 0.75);
  EXPECT_DOUBLE_EQ(m.cost.wall_s, 10);
  EXPECT_DOUBLE_EQ(m.cost.judge_s, 4);
  EXPECT_EQ(m.cost.judged, 4);
}

}  // namespace
}  // namespace ax::report
