// Codegen (emission): turns the fused kernels of a traced graph under a plan
// (schedule.h) into a KernelBench ModelNew source.
//
// The generated file is the task's own source, then the Triton kernels in the
// schedule's order, then `class ModelNew(Model)` overriding forward: library
// operators (and anything the compiler does not generate) stay the PyTorch
// calls of the trace, so the submodules and parameters are the reference's,
// built in the same order. The resolved plan is written into the source as a
// marker comment (`# adaexplore-plan: {...}`, plan.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/graph.h"
#include "builtin/plan.h"
#include "builtin/reduce.h"
#include "builtin/rownorm.h"
#include "builtin/schedule.h"
#include "common/status.h"

namespace ax::builtin {

// The source of ModelNew for graph under plan; *kernels says how many Triton
// kernels it launches (an error when there would be none: nothing to fuse);
// *resolved is the plan with every kernel's schedule filled in, as the
// source's marker comment records it.
Status Generate(const Graph& g, const std::string& task_source, const Plan& plan, std::string* source,
                int* kernels = nullptr, Plan* resolved = nullptr);

}  // namespace ax::builtin
