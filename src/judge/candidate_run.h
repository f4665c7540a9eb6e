// The evaluation protocol for one candidate on one device (docs/judge.md,
// "Per candidate"): build in a warm sandboxed worker, correctness trials on
// fresh inputs compared by the trusted reference, the custom-kernel check,
// baselines, timing with its rules, the check of the timed output, and the
// re-check of speedups too good to be true. Verdicts are cached.
#pragma once

#include <cstdint>
#include <string>

#include "judge/device_context.h"
#include "judge/judge.h"
#include "judge/judge_cache.h"

namespace ax {

// *footprint (optional): the task's measured device footprint, for placement.
EvalResult JudgeCandidate(const PoolConfig& cfg, DeviceContext* dev, JudgeCache* cache, const EvalRequest& req,
                          int64_t* footprint = nullptr);

// An error that says the GPU ran out of memory (PyTorch's allocator, the
// CUDA driver or runtime), as opposed to a kernel's own resource limits.
bool IsDeviceOutOfMemory(const std::string& error);

}  // namespace ax
