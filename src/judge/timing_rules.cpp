#include "judge/timing_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <set>

namespace ax {

ClockBound ClockBoundFor(bool cuda) {
  // GPU: 10% of the claim, plus what the candidate's loop costs beyond the
  // trusted one (its guard after every call, its end-of-request check) and
  // their scatter. CPU: the Triton interpreter's calls scatter by 20-35%
  // around their median under load, and two processes' loops by up to half
  // the loop's cost (docs/judge.md has the figures).
  // On an H200 (2026-12-03, tests/gpu/calibrate_timing.py, 60 calls): honest
  // requests exceeded loop + claim by 6-8 ms on average and 16.4 ms at most,
  // hence the 20 ms fixed part.
  if (cuda) return {0.10, 20.0, 0.05, 0.10};
  return {0.50, 30.0, 3.0, 0.50};
}

double MedianGap(const TimingReport& r) {
  std::vector<double> gaps;
  for (size_t i = 0; i < r.stream_ms.size() && i < r.device_ms.size(); ++i) {
    gaps.push_back(r.device_ms[i] - r.stream_ms[i]);
  }
  return ComputeStats(gaps).median;
}

std::optional<double> GpuTimeMedian(const std::vector<double>& per_call) {
  if (per_call.empty() || per_call.size() > 16) return std::nullopt;
  for (double x : per_call) {
    if (!std::isfinite(x) || x < 0) return std::nullopt;
  }
  return ComputeStats(per_call).median;
}

int CheckedCall(int warmup, int iters, int sets) {
  if (iters < 1) return -1;
  if (sets < 1) sets = 1;
  std::set<int> seen;
  for (int w = 0; w < std::min(warmup, sets); ++w) seen.insert(w);
  int checked = iters - 1;
  for (int i = 0; i < iters; ++i) {
    if (seen.count(i % sets)) checked = i;
    seen.insert(i % sets);
  }
  return checked;
}

namespace {

constexpr double kWorkerClockSlackMs = 0.1;

bool Plausible(const std::vector<double>& xs, size_t n) {
  if (xs.size() != n) return false;
  for (double x : xs) {
    if (!std::isfinite(x) || x < 0) return false;
  }
  return true;
}

// Rejects as `timing_forged`, with a one-line error.
__attribute__((format(printf, 2, 3))) void Reject(TimingDecision* d, const char* format, ...) {
  char buf[400];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  d->rejected = true;
  d->error = buf;
  if (std::find(d->flags.begin(), d->flags.end(), "timing_forged") == d->flags.end()) d->flags.push_back("timing_forged");
}

}  // namespace

TimingDecision DecideTiming(const TimingReport& r, bool cuda, int warmup, int iters,
                            const std::optional<EagerTiming>& eager, std::optional<double> loop_ms) {
  TimingDecision d;
  const size_t n = static_cast<size_t>(std::max(iters, 0));
  if (!Plausible(r.stream_ms, n) || !Plausible(r.device_ms, n) || !Plausible(r.host_ms, n)) {
    Reject(&d, "the timing reply holds %zu stream, %zu device and %zu worker figures (finite, >= 0) for %zu timed calls",
           r.stream_ms.size(), r.device_ms.size(), r.host_ms.size(), n);
    return d;
  }
  if (!r.spin_ms.empty() && !Plausible(r.spin_ms, n)) {
    Reject(&d, "the timing reply holds %zu spin figures (finite, >= 0) for %zu timed calls", r.spin_ms.size(), n);
    return d;
  }
  const Stats ss = ComputeStats(r.stream_ms), ds = ComputeStats(r.device_ms);
  const double gap = MedianGap(r);
  d.used = ss;
  bool use_device = false;
  if (cuda) {
    // Work left running on other streams shows as a longer wait at the
    // device-wide synchronise than the baseline needed: count it.
    const double base_gap = eager ? eager->gap_ms : 0.005;
    if (gap > base_gap + std::max(0.01, 0.05 * ss.median)) {
      d.flags.push_back("side_stream_work");
      d.used = ds;
      use_device = true;
    }
  }
  d.runtime_ms = d.used.median;
  const ClockBound bound = ClockBoundFor(cuda);
  // The worker's clock per call brackets the events (from before the start
  // event to after the last synchronise): events far below it were not
  // measured.
  // With GPU timing the worker's clock also covers the spin queued before
  // the start event: it is taken off per call.
  std::vector<double> host = r.host_ms;
  for (size_t i = 0; i < r.spin_ms.size(); ++i) host[i] = std::max(0.0, host[i] - r.spin_ms[i]);
  const double host_median = ComputeStats(host).median;
  // (Its own synchronisations add some 20-50 us per call.)
  if (cuda && (1.0 + bound.rel) * d.runtime_ms + kWorkerClockSlackMs < host_median) {
    Reject(&d,
           "the candidate's CUDA events claim %.4f ms per call, its own worker's clock %.4f ms: timing reports were "
           "forged (the bound is %.0f%% plus %.2f ms)",
           d.runtime_ms, host_median, bound.rel * 100, kWorkerClockSlackMs);
    return d;
  }
  // The timed calls cannot have taken longer, by the candidate's own report,
  // than the whole request took on the judge's clock.
  double reported = 0;
  for (double x : use_device ? r.device_ms : r.stream_ms) reported += x;
  if (r.request_ms + 5.0 < 0.9 * reported) {
    Reject(&d,
           "the timing request took %.1f ms on the judge's clock, but the candidate reported %.1f ms for its timed calls "
           "alone: timing reports were forged",
           r.request_ms, reported);
    return d;
  }
  // The judge's clock: the request minus what the loop costs alone (a null
  // model's request in a trusted worker, just before; else the eager
  // baseline's request minus its calls) is what the candidate's calls took;
  // its claim (every call at its median) must come within the bound of it.
  const int calls = std::max(warmup, 0) + iters;
  if ((loop_ms || eager) && calls > 0) {
    const double overhead = std::max(0.0, loop_ms ? *loop_ms : eager->wall_ms - calls * eager->median_ms);
    const double measured = std::max(0.0, r.request_ms - overhead);
    d.host_ms = measured / calls;
    const double claimed = calls * d.runtime_ms;
    const double allowance = bound.Allowance(calls, overhead);
    if (measured > (1.0 + bound.rel) * claimed + allowance) {
      Reject(&d,
             "the candidate's reported times disagree with the judge's clock: it claims %.4f ms per call, the judge "
             "measured %.4f ms (over %d calls the bound is %.0f%% plus %.1f ms)",
             d.runtime_ms, *d.host_ms, calls, bound.rel * 100, allowance);
      d.clock_disagrees = true;
      return d;
    }
  }
  return d;
}

}  // namespace ax
