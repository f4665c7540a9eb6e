#include "judge/timing_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ax {

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

TimingDecision DecideTiming(const TimingReport& r, bool cuda, int calls, const std::optional<EagerTiming>& eager) {
  TimingDecision d;
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
  // The worker's own clock per call (captured before candidate code ran; the
  // guard flags a replaced clock) bounds what the events may claim.
  const double host_median = r.host_ms.empty() ? 0.0 : ComputeStats(r.host_ms).median;
  auto flag = [&](const char* f) {
    if (std::find(d.flags.begin(), d.flags.end(), f) == d.flags.end()) d.flags.push_back(f);
  };
  if (cuda && host_median > 0 && d.runtime_ms < 0.5 * host_median - 0.05) {
    flag("timing_inconsistent");
    d.runtime_ms = host_median;
  }
  // The parent's clock: the same loop around the eager baseline took
  // wall_ms; the difference per call bounds what the candidate may claim. A
  // single scheduling stall would move a per-call figure of a short kernel a
  // lot, so the bound allows 100 ms plus 10% of the baseline's wall time.
  if (eager && calls > 0) {
    const double extra = r.request_ms - eager->wall_ms;
    d.host_ms = std::max(0.0, eager->median_ms + extra / calls);
    const double slack = 100.0 + 0.1 * eager->wall_ms;
    // The allowance lowers the estimate (benefit of the doubt); the estimate
    // itself may be far below the baseline's median: a faster candidate.
    const double est = std::max(0.0, eager->median_ms + (extra - slack) / calls);
    if (d.runtime_ms < 0.5 * est - 0.05) {
      flag("timing_inconsistent");
      d.runtime_ms = est;
    }
  }
  // The other direction: the timed calls cannot have taken longer, by the
  // candidate's own report, than the whole request took on the parent's clock.
  double reported = 0;
  for (double x : use_device ? r.device_ms : r.stream_ms) reported += x;
  if (r.request_ms + 5.0 < 0.9 * reported) {
    flag("timing_inconsistent");
    d.rejected = true;
    char buf[220];
    std::snprintf(buf, sizeof buf,
                  "the timing phase took %.1f ms on the judge's clock, but the candidate reported %.1f ms for its "
                  "timed calls alone: timing reports were forged",
                  r.request_ms, reported);
    d.error = buf;
  }
  return d;
}

}  // namespace ax
