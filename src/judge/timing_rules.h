// The judge's rules that turn a candidate's timing reply into its runtime
// (docs/judge.md, "Per candidate", steps 6 and 7, and "The judge's clock"):
// which figure counts, which timed call's output is checked, and the bound
// within which the times the candidate reports must agree with the judge's
// own clock around its timing request, once the loop's own cost (measured
// in a trusted worker with a null model just before) is taken off.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/util.h"

namespace ax {

// One `time` reply: per timed call, the stream-event, device-wide-event and
// worker-clock milliseconds, with GPU timing (TimingMode::kGpu) the queued
// spin's milliseconds (inside the worker's clock, before the start event);
// and the parent's clock for the whole request.
struct TimingReport {
  std::vector<double> stream_ms, device_ms, host_ms, spin_ms;
  double request_ms = 0;
};

// The eager baseline timed with the same loop: its median, the parent's
// clock for its whole request, and its median wait at the device-wide sync.
struct EagerTiming {
  double median_ms = 0, wall_ms = 0, gap_ms = 0;
};

// How far the calls of a timing request, on the judge's clock, may exceed
// what the candidate claims for them (warm-up plus timed calls, each at its
// median): `rel` of the claim, plus an allowance for the scatter of the
// loop's cost between two processes: `fixed_ms`, `per_call_ms` per call and
// `loop_rel` of the loop's measured cost. Calibrated with
// tests/gpu/calibrate_timing.py (figures in docs/judge.md).
struct ClockBound {
  double rel = 0, fixed_ms = 0, per_call_ms = 0, loop_rel = 0;
  double Allowance(int calls, double loop_ms) const { return fixed_ms + per_call_ms * calls + loop_rel * loop_ms; }
};
ClockBound ClockBoundFor(bool cuda);

// How many timing requests the judge makes before it rejects a candidate
// whose every measurement the judge's clock alone disagreed with.
constexpr int kClockAttempts = 3;

struct TimingDecision {
  Stats used;                     // the stream figure, or the device-wide one (side_stream_work)
  double runtime_ms = 0;          // what speedups are computed from
  std::optional<double> host_ms;  // the judge's clock per call, the loop's overhead taken off (with an eager baseline)
  std::vector<std::string> flags;
  bool rejected = false;          // reported times that disagree with a clock (`timing_forged`)
  bool clock_disagrees = false;   // rejected by the judge's clock alone: a scheduling stall can do
                                  // that, so the judge measures again before rejecting
                                  // (kClockAttempts measurements in all)
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
// iters: the calls in the request; loop_ms: the judge's clock around the same
// request timing a null model in a trusted worker (the loop alone), else the
// eager baseline's wall time minus its calls stands for the loop.
TimingDecision DecideTiming(const TimingReport& r, bool cuda, int warmup, int iters,
                            const std::optional<EagerTiming>& eager, std::optional<double> loop_ms = std::nullopt);

}  // namespace ax
