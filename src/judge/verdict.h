// Verdict: what the judge decided about one candidate on one task.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "judge/profile.h"

namespace ax {

// The statuses of the public contract (shared/docs/design.md).
inline constexpr const char* kStatusOk = "ok";
inline constexpr const char* kStatusCompileError = "compile_error";
inline constexpr const char* kStatusRuntimeError = "runtime_error";
inline constexpr const char* kStatusMismatch = "mismatch";
inline constexpr const char* kStatusTimeout = "timeout";
inline constexpr const char* kStatusCrashed = "crashed";
inline constexpr const char* kStatusRejected = "rejected";

struct TimingSummary {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, min_ms = 0, max_ms = 0, mean_ms = 0, stdev_ms = 0;
  int n = 0;
  nlohmann::json ToJson() const;
};

struct Verdict {
  std::string status = kStatusOk;
  bool correct = false;
  std::vector<std::string> flags;
  std::string error;
  std::optional<double> max_abs_error;
  std::optional<double> runtime_ms;
  TimingSummary timing;
  std::optional<double> host_ms;          // the parent's clock, per call (cross-check)
  // GPU only, timed candidates: the medians over the three calls of the
  // profiled trial after the timing, the device held alone and the L2 flushed
  // before each. Span: first GPU activity's start to the last one's end
  // (launch gaps included, host time before the first launch not); busy: the
  // sum of their durations. The kernels' own time, for bandwidth figures;
  // speedups use runtime_ms.
  std::optional<double> gpu_span_ms;
  std::optional<double> gpu_busy_ms;
  // With the GPU times: the median call's kernels, each with its share of
  // the busy time, and the roofline against the device's measured peaks.
  std::optional<Profile> profile;
  std::map<std::string, double> baseline_ms;
  std::map<std::string, double> speedup;
  std::string device;                     // "cpu" or the GPU's name
  int device_index = -1;                  // the GPU's index (cuda:N) on the host that judged it; -1: the CPU
  std::string worker;                     // the remote judge worker that judged it (empty: the local pool)
  std::string timing_source;              // "cuda_events" or "cpu_clock"
  std::string precision = "fp32";         // what the task was judged in: fp32, fp16 or bf16
  std::string timing_mode = "host";       // what a timed call covers: host (launches included) or gpu
  nlohmann::json task;                    // path, hash, degenerate, outputs
  nlohmann::json candidate;               // path, hash
  nlohmann::json env;                     // torch, triton, python versions
  nlohmann::json protocol;
  std::string isolation;
  std::string output_transfer;  // how outputs reached the reference: "device" or "file" (empty: none did)
  std::string output_tail;
  double judge_seconds = 0;
  std::map<std::string, double> phases;   // seconds: load, wait (for the device), trials, timing
  bool cached = false;

  void AddFlag(const std::string& f);
  bool HasFlag(const std::string& f) const;
  nlohmann::json ToJson() const;
  static Verdict FromJson(const nlohmann::json& j);
  // A short, human-readable report (several lines).
  std::string ToText() const;
};

}  // namespace ax
