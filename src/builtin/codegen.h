// Codegen: turns a traced graph and a plan into a KernelBench ModelNew source.
//
// The generated file is the task's own source, then the Triton kernels, then
// `class ModelNew(Model)` overriding forward: library operators (and anything
// the compiler does not generate) stay the PyTorch calls of the trace, so the
// submodules and parameters are the reference's, built in the same order.
// The plan is written into the source as a marker comment
// (`# adaexplore-plan: {...}`) so that a later step can read it back.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/graph.h"
#include "builtin/reduce.h"
#include "builtin/rownorm.h"
#include "common/status.h"

namespace ax::builtin {

struct KernelSchedule {
  int block = 1024;  // elements per program
  int warps = 4;
  bool operator==(const KernelSchedule&) const = default;
};

struct Plan {
  bool singleton = false;           // one kernel per operator
  std::vector<std::string> cuts;    // fusion boundaries: a kernel ends after these nodes
  std::vector<KernelSchedule> sched;  // per kernel, in order; missing entries take the default
  bool library_reductions = false;  // reductions and norms stay PyTorch calls
  // A norm whose only readers are one elementwise kernel of its shape is
  // applied inside that kernel (its statistics kernel stays): one pass less.
  bool norm_epilogue = false;
  // An elementwise kernel whose only reader is a reduction or norm of its
  // shape is computed inside the reduction's kernels: one pass less.
  bool reduce_prologue = false;
  // An elementwise kernel that reads a sum, mean, max or min over rows of its
  // own shape runs inside the reduction's kernel (ReductionEpilogue): the
  // reduced value stays in registers; short rows are read once.
  bool red_epilogue = false;
  // Sibling reductions: sums, means, maxima and minima over the same rows of
  // inputs they share (after their prologues) run as one kernel that reads
  // each shared input once and keeps one accumulator per reduction.
  bool siblings = false;
  std::vector<RedSchedule> red;     // per generated reduction, in order (0 = from the geometry)
  RedSchedule RedFor(size_t k) const { return k < red.size() ? red[k] : RedSchedule(); }
  // nn.Linear layers become Triton GEMMs (gemm.h), each with the elementwise
  // kernel that alone reads it fused in as its epilogue.
  bool gemm = false;
  // Convolution modules become implicit-GEMM Triton kernels (conv.h), with
  // their epilogues, as GEMMs do; set only with gemm (both share gsched).
  bool conv = false;
  std::vector<GemmSchedule> gsched;  // per GEMM or convolution, in order
  // Safe algebraic rewrites (see CountLinearReductions).
  bool algebra = false;
  GemmSchedule GemmFor(size_t k) const { return k < gsched.size() ? gsched[k] : GemmSchedule(); }
  // Row norms (rownorm.h; generated unless library_reductions): per norm, in
  // order, its strategy and knobs; a missing entry takes the first strategy
  // of RowNormStrategies at its default.
  std::vector<RowNormSchedule> nsched;

  FusionOptions Fusion() const;
  nlohmann::json ToJson() const;
  static Status FromJson(const nlohmann::json& j, Plan* out);
  KernelSchedule For(size_t k) const { return k < sched.size() ? sched[k] : KernelSchedule(); }
};

inline constexpr const char* kPlanMarker = "# adaexplore-plan: ";

// The reductions and normalisations generated under plan: (node index, operator).
std::vector<std::pair<int, RedOp>> FormReductions(const Graph& g, const Plan& plan);

// The matrix products generated under plan (none unless plan.gemm), and the
// convolutions (with plan.conv), in graph order: (node index, operator).
std::vector<std::pair<int, GemmOp>> FormGemms(const Graph& g, const Plan& plan);

// The tile configuration plan gives GEMM or convolution k (op): its own, or the default.
GemmSchedule GemmScheduleFor(const Plan& plan, size_t k, const GemmOp& op);

// The row norms generated under plan: (node index, operator).
std::vector<std::pair<int, RowNormOp>> FormRowNorms(const Graph& g, const Plan& plan);
// The schedule plan gives row norm k (op): its own, or the default.
RowNormSchedule RowNormFor(const Plan& plan, size_t k, const RowNormOp& op);

// How many sums or means over a Linear layer's output features (through
// additions of per-feature or scalar terms and scalings by scalars) the graph
// has. Under plan.algebra each is computed as x . (sum_n W_n) + sum_n b_n and
// the chain applied to that sum: a matrix-vector product instead of the
// matrix product, the same value for every input up to rounding.
int CountLinearReductions(const Graph& g);

// How many norms plan would apply inside the elementwise kernel after them
// (with norm_epilogue set).
int CountNormEpilogues(const Graph& g, const Plan& plan);
// The reductions that would run an elementwise kernel as their epilogue under
// plan with red_epilogue set.
int CountRedEpilogues(const Graph& g, const Plan& plan);

// How many elementwise kernels plan would compute inside the reduction that
// reads them (with reduce_prologue set).
int CountReducePrologues(const Graph& g, const Plan& plan);

// How many reductions plan would run inside the kernel of an earlier
// sibling reduction (with siblings set).
int CountSiblingReductions(const Graph& g, const Plan& plan);

// The source of ModelNew for graph under plan; *kernels says how many Triton
// kernels it launches (an error when there would be none: nothing to fuse);
// *resolved is the plan with every kernel's schedule filled in, as the
// source's marker comment records it.
Status Generate(const Graph& g, const std::string& task_source, const Plan& plan, std::string* source,
                int* kernels = nullptr, Plan* resolved = nullptr);

// Reads the plan back from a generated source's marker comment.
Status ParsePlanMarker(const std::string& source, Plan* out);

}  // namespace ax::builtin
