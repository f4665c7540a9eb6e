// Metrics: the figures a run is judged by, as pure functions over plain
// structs (no files, no SQLite), so that every number can be checked by hand.
//
// Definitions (docs/report.md; /work/shared/docs/design.md "Figures we report"):
//   speedup      baseline median / candidate median, of the task's best
//                correct kernel, vs eager PyTorch and vs torch.compile.
//   correctness  tasks with a correct kernel / tasks.
//   geomean, median, mean speedup
//                over the tasks whose best kernel is correct AND timed against
//                that baseline; each speedup clamped at 10x (from above only),
//                the unclamped figure reported beside it.
//   fast_p       tasks with a correct kernel whose speedup is strictly above p
//                / all tasks (tasks without a correct or timed kernel count as
//                failures).
//   user score   geomean over all tasks of min(max(speedup, 1), 10); a task
//                without a correct (timed) kernel counts 1.0: the user keeps
//                PyTorch.
//   scaling      per step k: the user score of the best kernels found in the
//                first k steps (vs eager, as judged during the search), and
//                the fraction of tasks with a correct kernel by step k. A task
//                that stopped before step k keeps its final best.
// Each figure is computed over all tasks and again with degenerate tasks
// (flag degenerate_task) excluded; the excluded count is stated.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ax::report {

inline constexpr double kSpeedupClamp = 10.0;
// The p of fast_p reported in tables.
inline const std::vector<double>& FastPThresholds() {
  static const std::vector<double> p = {0, 0.5, 0.8, 1, 1.5, 2};
  return p;
}

struct Cost {
  int64_t llm_calls = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double usd = 0;
  double llm_latency_s = 0;  // sum of call latencies
  double wall_s = 0;         // the task's search wall time (summed over tasks in aggregates)
  double judge_s = 0;        // judge time of the verdicts recorded for the task
  int64_t judged = 0;        // candidates judged (verdicts recorded)

  Cost& operator+=(const Cost& o);
};

// What metrics need of one task.
struct TaskOutcome {
  std::string name;
  bool correct = false;  // the task has a correct kernel
  // Speedups of the best correct kernel; absent when not correct or not timed
  // against that baseline (e.g. no torch.compile baseline on the CPU).
  std::optional<double> speedup_eager, speedup_compile;
  bool degenerate = false;
  // Per step (node order), the speedup vs eager of that step's candidate
  // when correct and timed, else 0.
  std::vector<double> step_speedups;
  Cost cost;
};

struct SpeedupStats {
  std::string baseline;      // "eager" or "compile"
  int tasks = 0;             // tasks in the set
  int timed = 0;             // tasks with a correct kernel timed against this baseline
  // Over the `timed` tasks; 0 when timed == 0.
  double geomean = 0, median = 0, mean = 0;                       // clamped at 10x
  double geomean_unclamped = 0, median_unclamped = 0, mean_unclamped = 0;
  int clamped = 0;           // speedups above 10x that the clamp lowered
  double user_score = 1;     // geomean over all tasks of min(max(s,1),10), missing = 1
  std::vector<std::pair<double, double>> fast_p;  // (p, fraction of all tasks)
};

// One set of tasks (all, or non-degenerate).
struct SetMetrics {
  int tasks = 0;
  int correct = 0;
  double correctness = 0;    // correct / tasks (0 for an empty set)
  SpeedupStats eager, compile;
};

struct ScalingPoint {
  int step = 0;              // 1-based
  double user_score = 1;     // vs eager, clamped to [1, 10], no kernel yet = 1
  double correct_fraction = 0;
};

struct RunMetrics {
  SetMetrics all;
  SetMetrics non_degenerate;
  int degenerate = 0;
  std::vector<std::string> degenerate_tasks;
  Cost cost;
  std::vector<ScalingPoint> scaling;         // all tasks
};

// --- the pure functions -----------------------------------------------------
double GeoMean(const std::vector<double>& v);   // of positive values; 0 for empty
double Median(std::vector<double> v);           // 0 for empty
double Mean(const std::vector<double>& v);      // 0 for empty
double ClampSpeedup(double s);                  // min(s, 10)
double UserValue(std::optional<double> s);      // min(max(s, 1), 10); 1 when absent
// Fraction of `tasks` with speedup > p (strictly), over all of them.
double FastP(const std::vector<std::optional<double>>& speedups, double p);

SpeedupStats ComputeSpeedupStats(const std::string& baseline, const std::vector<std::optional<double>>& speedups);
SetMetrics ComputeSetMetrics(const std::vector<const TaskOutcome*>& tasks);
std::vector<ScalingPoint> ComputeScaling(const std::vector<const TaskOutcome*>& tasks);
RunMetrics ComputeMetrics(const std::vector<TaskOutcome>& tasks);

}  // namespace ax::report
