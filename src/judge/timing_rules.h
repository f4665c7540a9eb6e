// The judge's rules that turn a candidate's timing reply into its runtime
// (docs/judge.md, "Per candidate", steps 6 and 7, and "The judge's clock"):
// which figure counts, which timed call's output is checked, and the bound
// within which the times the candidate reports must agree with the judge's
// own clock around its timing request, calibrated on the eager baseline's
// identical loop in a trusted worker.
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

// How far the calls of a timing request, on the judge's clock, may exceed
// what the candidate claims for them (warm-up plus timed calls, each at its
// median): `rel` of the claim plus `fixed_ms` plus `per_call_ms` per call.
// Calibrated with tests/gpu/calibrate_timing.py (figures in docs/judge.md).
struct ClockBound {
  double rel = 0, fixed_ms = 0, per_call_ms = 0;
};
ClockBound ClockBoundFor(bool cuda);

struct TimingDecision {
  Stats used;                     // the stream figure, or the device-wide one (side_stream_work)
  double runtime_ms = 0;          // what speedups are computed from
  std::optional<double> host_ms;  // the judge's clock per call, the loop's overhead taken off (with an eager baseline)
  std::vector<std::string> flags;
  bool rejected = false;          // reported times that disagree with a clock (`timing_forged`)
  bool clock_disagrees = false;   // rejected by the judge's clock alone: a scheduling stall can do
                                  // that once, so the judge measures once more before rejecting
  std::string error;
};

// The median wait at the device-wide synchronise after the stream's end
// (device-wide minus stream figure, per call).
double MedianGap(const TimingReport& r);

// The median of a profiled trial's per-call GPU times (`gpu_busy_ms`,
// `gpu_span_ms`): none unless every figure is a finite number >= 0 (at most
// 16 of them), so a malformed reply records nothing.
std::optional<double> GpuTimeMedian(const std::vector<double>& per_call);

// The timed call whose output is always checked: the last one whose input
// set (call i uses set i mod `sets`) an earlier call, warm-up or timed, had
// already used (a result cache keyed on input addresses returns stale data
// there); the last call when none does. The worker keeps the same one
// (common.checked_call).
int CheckedCall(int warmup, int iters, int sets);

// cuda: event timing (on CPU every figure is the worker's clock); warmup and
// iters: the calls in the request.
TimingDecision DecideTiming(const TimingReport& r, bool cuda, int warmup, int iters,
                            const std::optional<EagerTiming>& eager);

}  // namespace ax
