// The judge's rules that turn a candidate's timing reply into its runtime
// (docs/judge.md, "Per candidate", steps 6 and 7): which figure counts, and
// how the worker's and the parent's clocks bound what the events may claim.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/util.h"

namespace ax {

// One `time` reply: per timed call, the stream-event, device-wide-event and
// worker-clock milliseconds; and the parent's clock for the whole request.
struct TimingReport {
  std::vector<double> stream_ms, device_ms, host_ms;
  double request_ms = 0;
};

// The eager baseline timed with the same loop: its median, the parent's
// clock for its whole request, and its median wait at the device-wide sync.
struct EagerTiming {
  double median_ms = 0, wall_ms = 0, gap_ms = 0;
};

struct TimingDecision {
  Stats used;                    // the stream figure, or the device-wide one (side_stream_work)
  double runtime_ms = 0;         // what speedups are computed from
  std::optional<double> host_ms;  // the parent's per-call estimate (with an eager baseline)
  std::vector<std::string> flags;
  bool rejected = false;         // timing reports that cannot be true
  std::string error;
};

// The median wait at the device-wide synchronise after the stream's end
// (device-wide minus stream figure, per call).
double MedianGap(const TimingReport& r);

// The median of a profiled trial's per-call GPU times (`gpu_busy_ms`,
// `gpu_span_ms`): none unless every figure is a finite number >= 0 (at most
// 16 of them), so a malformed reply records nothing.
std::optional<double> GpuTimeMedian(const std::vector<double>& per_call);

// cuda: event timing (on CPU every figure is the worker's clock);
// calls: warm-up plus timed calls in the request.
TimingDecision DecideTiming(const TimingReport& r, bool cuda, int calls, const std::optional<EagerTiming>& eager);

}  // namespace ax
