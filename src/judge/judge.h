// Judge: decides whether a candidate kernel is correct and how fast it is.
//
// `Judge` is the interface the search calls: submit a (task, candidate)
// pair, get a future verdict. `JudgePool` is the local implementation:
// per device, one trusted reference worker and a set of warm candidate
// workers (imports done, no CUDA context yet); compilation of one candidate
// overlaps the trials and timing of another, while trials and timing hold the
// device exclusively. Verdicts and baselines are cached in SQLite. Several
// devices (`--device cuda:0,cuda:1`, `all`) share one pool: a request that
// names one is judged there, one that names "cuda" or "any" goes to the
// least-loaded device with room. RemoteJudge (broker/remote_judge.h) is the
// same interface over Redis Streams.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "judge/judge_cache.h"
#include "judge/profile.h"
#include "judge/protocol.h"
#include "judge/sandbox.h"
#include "judge/task.h"
#include "judge/verdict.h"

namespace ax {

struct EvalRequest {
  TaskRef task;
  std::string candidate_path;    // for the report only
  std::string candidate_source;
  JudgeOptions options;
};

struct EvalResult {
  // Not ok: no verdict could be reached. bad_input says whether the task
  // (or request) was at fault rather than the judge's environment.
  Status status;
  bool bad_input = false;
  Verdict verdict;
};

class Judge {
 public:
  virtual ~Judge() = default;
  virtual std::future<EvalResult> Submit(EvalRequest req) = 0;
  // Validates a task on a device: it builds, runs, returns tensors; says
  // whether it is degenerate.
  virtual Status CheckTask(const TaskRef& task, const JudgeOptions& opts, TaskInfo* info) = 0;
  // Traces the task's forward (torch.fx, shapes and dtypes from the task's
  // inputs) into a JSON graph for the builtin compiler (docs/worker-protocol.md,
  // op `trace`). A model that cannot be traced is an error with the code
  // kUnsupported and the message "cannot trace: ..."; other codes are the
  // judge's own failures (the worker did not start, the task did not load).
  virtual Status Trace(const TaskRef& task, const JudgeOptions& opts, nlohmann::json* graph) {
    return Status::Error(StatusCode::kUnsupported, "cannot trace: this judge does not trace tasks");
  }
  EvalResult Evaluate(EvalRequest req) { return Submit(std::move(req)).get(); }
  // How many devices judge in parallel behind this judge (a bench runs
  // --jobs tasks per device).
  virtual int Devices() const { return 1; }
  // The devices' names ("cpu", "NVIDIA H200"), one per device; starts their
  // trusted workers, so an error says the judge's environment is broken.
  virtual Status DeviceNames(std::vector<std::string>* names) {
    return Status::Error("this judge does not list its devices");
  }
  // The measured facts of the device opts.device names (the first one for
  // "cuda" or "any"): name, SMs, memory, copy bandwidth, fp32 matmul rate.
  virtual Status Facts(const JudgeOptions& opts, DeviceFacts* out) {
    return Status::Error("this judge does not measure its devices");
  }
};

struct PoolConfig {
  std::string python;                 // interpreter with torch (and triton)
  std::string worker_dir;             // folder holding the adaexplore_worker package
  std::string cache_dir;              // verdict/baseline database and build caches
  std::string scratch_root;           // per-worker scratch folders
  std::vector<std::string> devices;   // "cpu", "cuda:0", ...
  int workers_per_device = 2;         // candidates in flight per device
  int max_spawns = -1;                // candidate workers to start in all (-1: no limit; a single
                                      // eval needs 1, so no spare warms up while it is timed)
  SandboxLimits limits;
  double worker_start_timeout_s = 300;
  std::shared_ptr<SharedCache> shared_cache;  // optional: verdicts and baselines shared across hosts
};

// Fills python, worker_dir, cache_dir and scratch_root from the environment
// (ADAEXPLORE_PYTHON, ADAEXPLORE_WORKER_DIR, ADAEXPLORE_CACHE_DIR,
// ADAEXPLORE_SCRATCH) and the build's defaults.
PoolConfig DefaultPoolConfig();

std::unique_ptr<Judge> MakeJudgePool(const PoolConfig& cfg);

}  // namespace ax
