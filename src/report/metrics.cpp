#include "report/metrics.h"

#include <algorithm>
#include <cmath>

namespace ax::report {

namespace {
// A speedup that can enter a statistic: present, finite and positive. A
// correct kernel that was not timed (--no-time, a baseline that failed) has
// no speedup and is left out of speedup figures, never counted as 0 or 1.
bool Usable(const std::optional<double>& s) { return s && std::isfinite(*s) && *s > 0; }
}  // namespace

Cost& Cost::operator+=(const Cost& o) {
  llm_calls += o.llm_calls;
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  usd += o.usd;
  llm_latency_s += o.llm_latency_s;
  wall_s += o.wall_s;
  judge_s += o.judge_s;
  judged += o.judged;
  return *this;
}

double GeoMean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += std::log(x);
  return std::exp(sum / static_cast<double>(v.size()));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double ClampSpeedup(double s) { return std::min(s, kSpeedupClamp); }

double UserValue(std::optional<double> s) {
  if (!Usable(s)) return 1.0;
  return std::clamp(*s, 1.0, kSpeedupClamp);
}

double FastP(const std::vector<std::optional<double>>& speedups, double p) {
  if (speedups.empty()) return 0;
  int n = 0;
  for (const auto& s : speedups)
    if (Usable(s) && *s > p) ++n;
  return static_cast<double>(n) / static_cast<double>(speedups.size());
}

SpeedupStats ComputeSpeedupStats(const std::string& baseline, const std::vector<std::optional<double>>& speedups) {
  SpeedupStats st;
  st.baseline = baseline;
  st.tasks = static_cast<int>(speedups.size());
  std::vector<double> raw, clamped, user;
  for (const auto& s : speedups) {
    user.push_back(UserValue(s));
    if (!Usable(s)) continue;
    raw.push_back(*s);
    clamped.push_back(ClampSpeedup(*s));
    if (*s > kSpeedupClamp) ++st.clamped;
  }
  st.timed = static_cast<int>(raw.size());
  st.geomean = GeoMean(clamped);
  st.median = Median(clamped);
  st.mean = Mean(clamped);
  st.geomean_unclamped = GeoMean(raw);
  st.median_unclamped = Median(raw);
  st.mean_unclamped = Mean(raw);
  st.user_score = user.empty() ? 1.0 : GeoMean(user);
  for (double p : FastPThresholds()) st.fast_p.push_back({p, FastP(speedups, p)});
  return st;
}

SetMetrics ComputeSetMetrics(const std::vector<const TaskOutcome*>& tasks) {
  SetMetrics m;
  m.tasks = static_cast<int>(tasks.size());
  std::vector<std::optional<double>> eager, compile;
  for (const TaskOutcome* t : tasks) {
    if (t->correct) ++m.correct;
    // A speedup counts only with a correct kernel, whatever the input says.
    eager.push_back(t->correct ? t->speedup_eager : std::nullopt);
    compile.push_back(t->correct ? t->speedup_compile : std::nullopt);
  }
  m.correctness = m.tasks ? static_cast<double>(m.correct) / m.tasks : 0;
  m.eager = ComputeSpeedupStats("eager", eager);
  m.compile = ComputeSpeedupStats("compile", compile);
  return m;
}

std::vector<ScalingPoint> ComputeScaling(const std::vector<const TaskOutcome*>& tasks) {
  size_t steps = 0;
  for (const TaskOutcome* t : tasks) steps = std::max(steps, t->step_speedups.size());
  std::vector<ScalingPoint> out;
  if (tasks.empty()) return out;
  std::vector<double> best(tasks.size(), 0.0);  // best-so-far per task, 0 = none yet
  for (size_t k = 0; k < steps; ++k) {
    std::vector<double> user;
    int found = 0;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const auto& s = tasks[i]->step_speedups;
      if (k < s.size() && std::isfinite(s[k]) && s[k] > best[i]) best[i] = s[k];
      user.push_back(UserValue(best[i] > 0 ? std::optional<double>(best[i]) : std::nullopt));
      if (best[i] > 0) ++found;
    }
    ScalingPoint p;
    p.step = static_cast<int>(k + 1);
    p.user_score = GeoMean(user);
    p.correct_fraction = static_cast<double>(found) / static_cast<double>(tasks.size());
    out.push_back(p);
  }
  return out;
}

RunMetrics ComputeMetrics(const std::vector<TaskOutcome>& tasks) {
  RunMetrics m;
  std::vector<const TaskOutcome*> all, nondeg;
  for (const auto& t : tasks) {
    all.push_back(&t);
    if (t.degenerate) {
      ++m.degenerate;
      m.degenerate_tasks.push_back(t.name);
    } else {
      nondeg.push_back(&t);
    }
    m.cost += t.cost;
  }
  m.all = ComputeSetMetrics(all);
  m.non_degenerate = ComputeSetMetrics(nondeg);
  m.scaling = ComputeScaling(all);
  return m;
}

}  // namespace ax::report
