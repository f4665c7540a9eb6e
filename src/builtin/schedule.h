// Scheduling: the fused kernels a traced graph becomes under a plan.
//
// Schedule(graph, plan) makes every fusion decision once: the elementwise
// groups, the reductions, GEMMs, convolutions and row norms that are
// generated, which groups run inside another kernel (a GEMM's or a
// reduction's epilogue, a reduction's prologue, a norm applied by the kernel
// that reads it), which reductions share one kernel, and which the algebraic
// rewrites remove. Its kernel list is what codegen emits, in order, and what
// the proposer enumerates plans and small steps over. Pure data and
// decisions: no source text, no files, no judge.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "builtin/cat_slots.h"
#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/conv_stats.h"
#include "builtin/gemm_reduce.h"
#include "builtin/graph.h"
#include "builtin/plan.h"
#include "builtin/reduce.h"
#include "builtin/rownorm.h"

namespace ax::builtin {

// A group input that is the output of norm reduction k_red, applied inside
// the group's kernel from the norm's input and statistics.
struct NormFeed {
  size_t k_red = 0;
  RedOp op;
  bool stats_in = false;  // its statistics come from the convolution it reads (conv_stats.h)
};

// The groups a reduction runs after its value, in its own kernel (plan
// red_epilogue): main, of the reduction's input shape, and pre, of the
// value's shape between them (sqrt(mean + eps)), when there is one.
struct RedEpi {
  size_t main = 0;
  size_t pre = static_cast<size_t>(-1);
  bool has_pre() const { return pre != static_cast<size_t>(-1); }
};

// A sum or mean over the N output features of a Linear, through a chain of
// elementwise operators affine in it (plan algebra; CountLinearReductions).
struct LinearReduce {
  size_t red = 0;          // the reduction replaced
  int linear = -1;         // the Linear node
  GemmOp gemm;
  std::vector<int> chain;  // the elementwise nodes between them, in order
  struct Step {
    std::string kind;  // add, sub, rsub (c - y), mul, div (y / c)
    EwOperand c;       // the other operand
  };
  std::vector<Step> steps;            // per chain node
  std::vector<std::string> operands;  // tensors and numbers the chain reads, in order
};

// What a fused kernel's main operation is.
enum class KernelKind {
  kPointwise,        // an elementwise group (index: the group)
  kRowNorm,          // index: the row norm
  kGemm,             // a matrix product (index: the GEMM)
  kConvolution,      // an implicit-GEMM convolution (index: the GEMM list's entry)
  kReduction,        // a reduction or normalisation (index: the reduction)
  kSiblings,         // reductions sharing one kernel (index: the first of them)
  kLinearReduction,  // a reduction rewritten as a matrix-vector product: torch calls, no Triton kernel
  kAttention,        // scaled_dot_product_attention (index: the attention)
  kRecurrent,        // a GRU, LSTM or RNN module, launched per step (index: the module)
};
const char* KernelKindName(KernelKind k);

// One launched kernel: its main operation, the elementwise groups computed
// inside it before (prologue) and after it (epilogue), and where its tile
// configuration lives in the plan (`sched`, `red`, `gsched` or `nsched` at
// `index`, by kind).
struct FusedKernel {
  KernelKind kind = KernelKind::kPointwise;
  size_t index = 0;
  int node = -1;                  // the graph node of the main operation (the group's last node)
  std::vector<size_t> prologue;   // groups, in the order they are computed
  std::vector<size_t> epilogue;   // groups, in the order they are computed
  std::vector<size_t> members;    // kSiblings: the later reductions computed with the first
  std::vector<size_t> norm_feeds; // kPointwise: the norms (reductions) it applies itself
  std::optional<size_t> column;   // kGemm, kConvolution: the reduction over its columns it computes
  std::optional<size_t> column_post;  // and the group it runs on that reduction's value
  std::optional<size_t> stats;    // kConvolution: the norm whose statistics it computes
  bool triton() const { return kind != KernelKind::kLinearReduction; }
};

struct FusedSchedule {
  std::vector<Group> groups;
  std::vector<std::pair<int, RedOp>> reds;
  std::vector<std::pair<int, GemmOp>> gemms;  // those the algebra removed are not here
  std::vector<std::pair<int, RowNormOp>> rnorms;
  std::vector<std::pair<int, AttentionOp>> attns;
  std::vector<std::pair<int, RnnOp>> rnns;
  std::vector<LinearReduce> linreds;

  std::map<size_t, size_t> linred_of;  // reduction -> rewrite
  std::set<int> unused;                // nodes no longer computed (a rewrite's Linear and chain)
  std::set<size_t> chain_groups;       // groups made of a rewrite's chain
  std::vector<std::map<size_t, NormFeed>> feeds;  // per group: input position -> the norm it applies
  std::set<int> fed;                   // norm nodes applied by the kernel that reads them
  std::map<size_t, size_t> epilogue_of;  // GEMM -> group
  std::map<size_t, size_t> gemm_of_group;  // group -> GEMM
  std::map<size_t, ColumnFusion> column_of;  // GEMM -> the reduction over its columns in its kernel
  std::map<size_t, size_t> gemm_of_column;   // that reduction -> the GEMM
  std::map<size_t, size_t> gemm_of_post;     // the group run on its value there -> the GEMM
  std::map<size_t, size_t> stats_of;       // convolution -> the norm whose statistics its kernel computes
  std::map<size_t, size_t> conv_of_stats;  // that norm -> the convolution
  std::map<size_t, size_t> prologue_of;  // reduction -> group
  std::map<size_t, RedEpi> epi_of;       // reduction -> groups
  std::map<size_t, size_t> epi_of_group;  // an epilogue's main group -> reduction
  std::map<size_t, std::vector<size_t>> sib_of;  // leader -> the later members
  std::set<size_t> follower;           // reductions computed in a leader's kernel
  std::set<size_t> inside;             // groups not launched on their own

  // The launched kernels in emission order: pointwise groups, row norms,
  // GEMMs and convolutions, reductions.
  std::vector<FusedKernel> kernels;
  // The concatenations whose pieces launched kernels store in place.
  CatSlots cats;
  // The plan with every launched kernel's tile configuration filled in, and
  // those of kernels that are not launched at their defaults.
  Plan resolved;

  // How many Triton kernels the forward has (a recurrent module's counts once).
  int TritonKernels() const;
  // The pointwise groups launched as kernels of their own, in order.
  std::vector<size_t> LaunchedGroups() const;
};

// The fused kernels of g under plan.
FusedSchedule Schedule(const Graph& g, const Plan& plan);

// The tensors kernel k of s stores at its flat index, in the order of its
// outputs: an elementwise kernel's outputs, a GEMM's or convolution's (its
// epilogue's, or its own) when it stores no reduction over its columns or
// statistics instead; none for other kernels.
std::vector<std::string> FlatOutputs(const Graph& g, const FusedSchedule& s, const FusedKernel& k);
// Those of all of s's launched kernels.
std::set<std::string> FlatStores(const Graph& g, const FusedSchedule& s);

// A scheduled kernel as a GPU profile names its Triton kernels:
// `_ax_kernel<k>` (pointwise group k), `_ax_red<k>...` (reduction k, or the
// sibling reductions led by k), `_ax_gemm_kernel<k>` (GEMM or convolution k),
// `_ax_rnorm<k>...` (row norm k), `_ax_attn_kernel<k>` (attention k),
// `_ax_rnn_kernel<k>` and `_ax_rnn_proj<k>` (recurrent module k). Other
// names (library kernels) are none.
struct KernelRef {
  KernelKind kind = KernelKind::kPointwise;
  size_t index = 0;
  bool operator==(const KernelRef&) const = default;
};
std::optional<KernelRef> KernelOfName(const FusedSchedule& s, const std::string& name);

// The scheduled kernel that took the most GPU time in a profile's (name, ms)
// list (its launches summed); none when no profiled kernel is one of s's.
std::optional<KernelRef> SlowestKernel(const FusedSchedule& s,
                                       const std::vector<std::pair<std::string, double>>& times);

// The reductions and normalisations generated under plan: (node index, operator).
std::vector<std::pair<int, RedOp>> FormReductions(const Graph& g, const Plan& plan);

// The matrix products generated under plan (none unless plan.gemm), and the
// convolutions (with plan.conv), in graph order: (node index, operator).
std::vector<std::pair<int, GemmOp>> FormGemms(const Graph& g, const Plan& plan);

// The tile configuration plan gives GEMM or convolution k (op): its own, or the default.
GemmSchedule GemmScheduleFor(const Plan& plan, size_t k, const GemmOp& op);

// The attention calls generated under plan (none unless plan.attention): (node index, operator).
std::vector<std::pair<int, AttentionOp>> FormAttentions(const Graph& g, const Plan& plan);
// The tile configuration plan gives attention k (op): its own, or the default.
AttentionSchedule AttentionScheduleFor(const Plan& plan, size_t k, const AttentionOp& op);

// The recurrent modules generated under plan (none unless plan.recurrent): (node index, operator).
std::vector<std::pair<int, RnnOp>> FormRnns(const Graph& g, const Plan& plan);
// The schedule plan gives recurrent module k (op): its own, or the default.
RnnSchedule RnnScheduleFor(const Plan& plan, size_t k, const RnnOp& op);

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

// How many reductions over a GEMM's columns plan would compute in the GEMM's
// kernel (with gemm_reduce set).
int CountColumnReductions(const Graph& g, const Plan& plan);

// How many norms' statistics plan would compute in the kernel of the
// convolution they read (with conv_stats set).
int CountConvStats(const Graph& g, const Plan& plan);

// How many reductions plan would run inside the kernel of an earlier
// sibling reduction (with siblings set).
int CountSiblingReductions(const Graph& g, const Plan& plan);

}  // namespace ax::builtin
