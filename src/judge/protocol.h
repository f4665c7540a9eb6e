// Protocol: the settings that define how a candidate is judged (tolerances,
// trials, timing), their defaults per device, and the key under which a
// verdict judged with them may be cached.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ax {

// The precision a task is judged in. fp16/bf16 cast the task's model (its
// floating parameters and buffers) and its floating inputs to that dtype, on
// the reference's side, the candidate's and the baselines' alike, as
// KernelBench's precision option does; integer inputs keep their dtype.
enum class Precision { kFp32, kFp16, kBf16 };

// "fp32", "fp16", "bf16".
const char* PrecisionName(Precision p);
// Accepts fp32|fp16|bf16 (also float32, float16, bfloat16); kInvalidInput otherwise.
Status ParsePrecision(const std::string& name, Precision* out);
// The key of a task loaded in a worker: the task's hash, with the precision
// appended when it is not fp32 (a worker may hold one task in several).
std::string WorkerTaskKey(const std::string& task_hash, Precision p);

// What a timed call's figure covers on a GPU. kHost: the call on an idle
// device, from its first launch to its last kernel's end, so the host's
// launch overhead counts (KernelBench's protocol). kGpu: the call queued
// behind a GPU spin that outlasts its launches, so the figure is the GPU time
// of its work in a busy stream (as in a CUDA graph or a pipelined network).
enum class TimingMode { kHost, kGpu };

// "host", "gpu".
const char* TimingModeName(TimingMode m);
// Accepts host|gpu; kInvalidInput otherwise.
Status ParseTimingMode(const std::string& name, TimingMode* out);

// Per-dtype absolute and relative tolerances.
struct Tolerance {
  std::string name;
  double fp32_atol, fp32_rtol, half_atol, half_rtol;
  nlohmann::json ToWorkerJson() const;  // {"float32": [atol, rtol], ...}
};

// "strict", "kernelbench-v0.1" or "adaexplore"; error for anything else.
Status LookupTolerance(const std::string& name, Tolerance* out);
const std::vector<std::string>& ToleranceNames();

// The judge's revision: part of every cache key, so that verdicts and
// baselines measured by a judge whose checks or timing loop differ are never
// served by this one. Raise it whenever either changes.
inline constexpr int kJudgeRevision = 2;

struct JudgeOptions {
  std::string device = "cpu";          // "cpu" or "cuda:N"
  std::string tolerance = "strict";
  Precision precision = Precision::kFp32;
  TimingMode timing = TimingMode::kHost;
  int trials = 5;                      // correctness trials, fresh inputs each
  int recheck_trials = 10;             // extra trials when speedup > speedup_recheck
  double speedup_recheck = 10.0;
  bool time = true;                    // time the candidate (and baselines)
  int warmup = -1;                     // -1: device default (GPU 10, CPU 2)
  int iters = -1;                      // -1: device default (GPU 50, CPU 5)
  int input_sets = 3;                  // input sets rotated through the timed calls
  long long flush_bytes = -1;          // -1: device default (GPU 256 MiB, CPU 0)
  std::vector<std::string> baselines;  // empty: device default (GPU eager+compile, CPU eager); {"none"}: none
  double compile_timeout_s = 600;      // import and builds (those of the first call included)
  double run_timeout_s = 300;          // one trial or the timing phase
  // The first call, its builds excluded, gets max(call_timeout_s, 100 x the
  // reference's call): a hung candidate is a timeout in seconds, not at the
  // build deadline.
  double call_timeout_s = 30;
  std::optional<unsigned long long> seed;  // fixed seeds (reproducible); random otherwise
  int init_seed = 42;                  // weights: same for reference and candidate
  bool use_cache = true;

  bool cuda() const { return device.rfind("cuda", 0) == 0; }
  // Fills the -1/empty fields with the device's defaults.
  JudgeOptions Resolved() const;
  // What identifies the protocol for caching (not the seed unless fixed).
  nlohmann::json ProtocolJson() const;
};

}  // namespace ax
