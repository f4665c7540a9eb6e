// Plan: the choices one candidate of the builtin compiler is generated
// under (which operators fuse, which generators run, and each kernel's tile
// configuration), as data. It travels between the proposer, the scheduler
// and the run store as JSON (ToJson/FromJson), and is written into the
// generated source as a marker comment (`# adaexplore-plan: {...}`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/attention.h"
#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/reduce.h"
#include "builtin/rnn.h"
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
  // Tap-major convolutions (ConvTapMajor) read the input as it is, strided by
  // channel, instead of permuting it channels-last first: no copy of the
  // input per call, less contiguous tile loads. Set only with conv.
  bool conv_native = false;
  // A sum, mean, max, min or logsumexp over a GEMM's columns (a
  // convolution's channels) that one tile holds runs in the GEMM's kernel
  // (gemm_reduce.h): the output itself is never written. Set only with gemm.
  bool gemm_reduce = false;
  // The statistics of a norm that alone reads a convolution's output (or its
  // epilogue's) are computed in the convolution's kernel (conv_stats.h): the
  // norm's statistics kernel, a read of the output, goes. Set only with conv.
  bool conv_stats = false;
  std::vector<GemmSchedule> gsched;  // per GEMM or convolution, in order
  // scaled_dot_product_attention calls become flash-style Triton kernels
  // (attention.h), each with its tile configuration (missing: the default).
  bool attention = false;
  std::vector<AttentionSchedule> asched;
  // nn.GRU, nn.LSTM and nn.RNN modules left whole by the tracer become
  // Triton kernels launched per step (rnn.h), each with its schedule
  // (missing: the default).
  bool recurrent = false;
  std::vector<RnnSchedule> rsched;
  // Safe algebraic rewrites (see CountLinearReductions).
  bool algebra = false;
  // The whole forward replayed from a CUDA graph (graph_capture.h): the
  // inputs copied into the graph's buffers and the outputs cloned every call.
  bool cuda_graph = false;
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

// Reads the plan back from a generated source's marker comment.
Status ParsePlanMarker(const std::string& source, Plan* out);

}  // namespace ax::builtin
