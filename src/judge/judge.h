// Judge: decides whether a candidate kernel is correct and how fast it is.
//
// `Judge` is the interface the search calls: submit a (task, candidate)
// pair, get a future verdict. `JudgePool` is the local implementation:
// per device, one trusted reference worker and a set of warm candidate
// workers (imports done, no CUDA context yet); compilation of one candidate
// overlaps the trials and timing of another, while trials and timing hold the
// device exclusively. Verdicts and baselines are cached in SQLite. A remote
// pool can implement the same interface.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
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
  // op `trace`). A model that cannot be traced is an error "cannot trace: ...".
  virtual Status Trace(const TaskRef& task, const JudgeOptions& opts, nlohmann::json* graph) {
    return Status::Error("cannot trace: this judge does not trace tasks");
  }
  EvalResult Evaluate(EvalRequest req) { return Submit(std::move(req)).get(); }
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
};

// Fills python, worker_dir, cache_dir and scratch_root from the environment
// (ADAEXPLORE_PYTHON, ADAEXPLORE_WORKER_DIR, ADAEXPLORE_CACHE_DIR,
// ADAEXPLORE_SCRATCH) and the build's defaults.
PoolConfig DefaultPoolConfig();

std::unique_ptr<Judge> MakeJudgePool(const PoolConfig& cfg);

}  // namespace ax
