// Reductions and normalisations for the builtin compiler.
//
// Every supported operator reads a float32 tensor x (made contiguous) as a
// matrix of `rows` x `R` through one address formula,
//
//   addr(row, r) = (row / RD) * S1 + (row % RD) * S2 + (r / IN) * S3 + (r % IN),
//
// which covers a reduction over any contiguous block of dimensions
// (sum over dim 1 of [B, D1, D2]: rows = B * D2, R = D1) and over everything
// but a contiguous block (batch norm over N, H, W per channel). Kinds:
//   sum, mean, amax, amin        -> one value per row; split over R when rows are few
//   argmax, argmin               -> one int64 index per row (first occurrence; NaN wins)
//   maxpool, avgpool (1-3 d)     -> one value per output position: a loop over the
//                                   window (its own kernel; geo.rows = outputs)
//   logsumexp                    -> one value per row (online max and sum)
//   xent (cross entropy, indices) -> one value: per row logsumexp minus the
//                                   target's value, partial sums per program,
//                                   then a one-program merge (mean or sum)
//   softmax, log_softmax         -> x's shape (an online pass, then a write pass)
//                                   (long rows of a large tensor: one split-row
//                                   kernel, RedSchedule::coop, for norms too)
//   norm (layer/group/instance/batch norm, training statistics)
//                                -> x's shape: a statistics kernel (split over R
//                                   when rows are few), then an apply kernel over
//                                   every element with the affine parameters
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "builtin/graph.h"
#include "common/status.h"

namespace ax::builtin {

struct Geometry {
  int64_t rows = 1, R = 1, RD = 1, S1 = 0, S2 = 0, IN = 1, S3 = 0;
  int64_t numel() const { return rows * R; }
  bool operator==(const Geometry&) const = default;
};

// x's shape with the dimensions in `reduced` reduced: false when neither the
// reduced dimensions nor the kept ones form one contiguous block.
bool MakeGeometry(const std::vector<int64_t>& shape, const std::vector<int>& reduced, Geometry* out);

struct RedOp {
  std::string kind;        // sum | mean | amax | amin | argmax | argmin | logsumexp | softmax | log_softmax | norm
                           // | maxpool | avgpool | cumsum | cumprod | xent
  std::string input;       // the node read
  std::string module;      // norm: the module's path (its weight, bias and running statistics)
  std::string norm_class;  // LayerNorm, GroupNorm, InstanceNorm2d, BatchNorm2d, ...
  Geometry geo;
  std::vector<int64_t> in_shape, out_shape;
  double eps = 1e-5;
  bool affine = false;
  int64_t ch_div = 1, ch_mod = 1;    // norm: parameter index = (flat // ch_div) % ch_mod
  int64_t row_div = 1, row_mod = 1;  // norm apply: row of a flat index = (flat // row_div) % row_mod
  bool running_stats = false;        // batch norm in training: update running_mean / running_var
  double momentum = 0.1;
  // Nodes this reduction replaces, not emitted; the first reads `input`:
  // max/min(x, dim)[0]: the max/min node; a reversed scan: the inner flip
  // and the scan.
  std::vector<std::string> absorbed;
  bool reverse = false;              // cumsum/cumprod of flip(scan(flip(x, d), d), d): from the row's end
  // maxpool / avgpool over the trailing len(pool_k) dimensions of [N, C, ...]
  std::vector<int64_t> pool_k, pool_s, pool_p, pool_d;  // window, stride, padding, dilation (max only)
  bool count_include_pad = true;
  bool pool_ceil = false;  // ceil_mode: a last window may run past the padded input
  // adaptive pooling: output i of a dimension of size L pools [i*L/O, ceil((i+1)*L/O)),
  // pool_k then holds the widest window per dimension
  bool pool_adaptive = false;
  // xent (F.cross_entropy with class indices over rows of x [B, C]): the
  // targets' node, the ignored index, and mean (else sum) over the rows kept
  std::string target;
  int64_t ignore_index = -100;
  bool mean = true;
};

// Python literals for generated code: a float (round-trips exactly) and a shape list.
std::string PyFloat(double v);
std::string PyShape(const std::vector<int64_t>& s);

// True when node n is a reduction or normalisation the compiler generates.
// A sum, mean, max, min, logsumexp, softmax, log_softmax or scan over
// dimensions of size 1 only is not one (false); *size_one then says so and
// *out holds its kind, input and absorbed nodes.
bool ClassifyReduction(const Graph& g, const Node& n, RedOp* out, bool* size_one = nullptr);

// Reductions over dimensions of size 1 only (sum, mean, max, min, logsumexp,
// cumsum, cumprod: the element itself; softmax: exp(x - x); log_softmax:
// x - x), rewritten into elementwise operators, which equal PyTorch's result
// for every input, infinities and NaN included (a sum of -0.0 gives -0.0
// where PyTorch gives 0.0). Without keepdim, a reshape (a view of the
// elementwise result) drops the dimensions. *out: g with the rewrites (the
// same names, so readers are unchanged; a torch.max whose values alone were
// read goes too). Returns how many were rewritten (0: *out is g).
int SimplifyTrivialReductions(const Graph& g, Graph* out);

// Safe algebra (the `algebra` plan): chains of scalar arithmetic on one tensor
// folded into one operator when the inner result has no other reader:
// (x * a) * b and (x / a) * b as x * c, (x / a) / b as x / (a * b), and
// additions and subtractions of numbers as one addition (x + a - b as
// x + (a - b)). One rounding instead of two, so results can differ by an ulp:
// the judge checks the plan like any other. Only number literals fold (not
// runtime scalars or tensors), and only to a finite constant. *out: g with
// the folds (same names for the outer operators, so readers are unchanged).
// Returns how many inner operators were folded away (0: *out is g).
int FoldScalarChains(const Graph& g, Graph* out);

// Schedule of a reduction kernel (0 = chosen from the geometry).
// coop: softmax, log_softmax and norms over long contiguous rows as one
// split-row kernel (each row split over programs that keep their chunk in
// registers and exchange partial results, so x is read once); requested: 0
// chosen from the geometry, -1 off, n > 0 on with n programs per SM; resolved:
// n > 0 when used (block_r is then the chunk a program holds), else -1 when
// asked off and 0 when not chosen.
// lag (norms in a split-row kernel): instead of holding its chunk while the
// rest of its row arrives, a program applies the row's statistics to the chunk
// KS items back, read again from L2 (1), or to the chunk it read a round
// earlier, held in registers (2: two chunks per program, a grid of at least KS
// programs); requested: 1 or 2 on, 0 or -1 off; resolved: 1 or 2 when used,
// else -1 or 0 as requested.
struct RedSchedule {
  int block_r = 0, block_m = 0, warps = 0, split = 0, coop = 0, lag = 0;
  bool operator==(const RedSchedule&) const = default;
};

// Programs per SM of a split-row reduction epilogue whose schedule leaves
// coop at 0.
constexpr int kCoopEpiloguePerSm = 16;

// Closes a tl.maximum / tl.minimum call so that a NaN operand gives NaN, as
// in PyTorch (clamp, maximum, hardtanh, amax, ...). By default the GPU's
// max/min return the other operand; Triton's interpreter propagates NaN either
// way, so only the GPU shows the difference.
inline constexpr const char* kNanArg = ", propagate_nan=tl.PropagateNan.ALL)";

// Whether op can run as one split-row kernel (RedSchedule::coop): a softmax,
// log_softmax or norm over contiguous rows too long for one tile.
bool CoopFits(const RedOp& op);

// The schedule actually used for op under the requested one.
RedSchedule ResolveSchedule(const RedOp& op, const RedSchedule& want);

// An elementwise prologue computed inside a reduction's kernel in place of
// loading its input: one read of the prologue's inputs instead of a write and
// a read of the intermediate tensor (codegen.cpp builds it from a group).
// Its lines are written by a PyWriter at depth 0, nested relative to one
// another only; the reduction's writer places them at its own depth.
struct ReductionPrologue {
  std::vector<std::string> params;  // the kernel's and launcher's inputs, in place of x
  std::string head;                 // launcher lines: shape asserts, contiguous, float()
  std::string tensor;               // a tensor argument: its device is the outputs', and it
                                    // stands in for a norm's missing weight or bias
  // Kernel lines that leave in `v` the element at the flat index `offs`
  // under mask `m`, and `other` where the mask is off.
  std::function<std::string(const std::string& other)> load;
  // Sibling reductions (EmitSiblingReductions): kernel lines computing every
  // member's value at `offs`, valid under mask `m`, into results[j] (shared
  // inputs loaded once).
  std::string lines;
  std::vector<std::string> results;
  // Inputs of the reduction's shape that `load` leaves in a kernel variable
  // (node -> variable): an epilogue in the same program reuses them.
  std::map<std::string, std::string> loaded;
};

// An elementwise group that reads a sum, mean, max or min (broadcast back over
// the reduced dimensions) computed inside the reduction's kernel: after the
// row's reduction, a second loop over the row runs the group at each element
// and writes its outputs; the reduced value never leaves registers, and a row
// that fits one block is read from memory once (codegen.cpp builds it; lines
// at depth 0, as a prologue's).
struct ReductionEpilogue {
  std::vector<std::string> params;  // the group's other inputs (ein<i>), after x or the prologue's
  std::string head;                 // launcher lines for them
  size_t outputs = 1;               // out0, out1, ...: the group's outputs, of x's shape
  // Kernel lines run once per row block on `red2`, the reduced value
  // ([BLOCK_M, 1]), before the loop (may be empty).
  std::string once;
  // Kernel lines reading the flat index `offs`, the mask `m`, `red2` and what
  // `once` computed; they store the outputs.
  std::string lines;
  // The same lines reading the inputs the reduction's kernel already holds
  // from those variables (the split-row kernel keeps its chunk in registers).
  std::string coop_lines;
};

// Whether op's rows suit a reduction epilogue (one program per row block,
// the row read a second time from cache): rows many enough, and short enough
// for the re-read to hit; or long contiguous rows of a large tensor, which a
// split-row kernel reduces and then runs the epilogue on from registers
// (RedSchedule::coop: chunk block_r, warps, programs per SM; -1 off).
bool EpilogueFits(const RedOp& op, const RedSchedule& want = RedSchedule());

// The Triton kernel(s) and the launcher `_ax_red<k>` for op (appended to *src).
// The launcher takes the input tensor, and for a norm also the module; a
// norm also gets `_ax_red<k>_stats(x, mod)` -> (x contiguous, mean, var, w, b, has_b),
// which updates the running statistics, for kernels that apply it themselves.
// With a prologue, the launcher takes the prologue's inputs (a norm's also its
// module; its `_stats` launcher then returns None for x).
// With an epilogue (sum, mean, amax, amin only; never split), the launcher
// takes x (or the prologue's inputs) and then the epilogue's inputs, and
// returns the epilogue's outputs.
Status EmitReduction(const RedOp& op, size_t k, const RedSchedule& sched, std::string* src,
                     const ReductionPrologue* pro = nullptr, const ReductionEpilogue* epi = nullptr);

// A norm whose per-row mean and biased variance another kernel computed (a
// convolution's, conv_stats.h), appended to *src:
// `_ax_red<k>_stats(x, mod, st)` with st = (mean, var) returns what the
// statistics launcher of EmitReduction returns (and updates the running
// statistics), and `_ax_red<k>(x, mod, st)` applies the norm over every
// element.
Status EmitNormFromStatistics(const RedOp& op, size_t k, std::string* src);

// Sibling reductions (sum, mean, amax, amin over the same rows of one shape)
// as one kernel `_ax_red<k>` that computes pro's values once per element and
// keeps one accumulator per reduction; the launcher takes pro's inputs and
// returns the reductions' values in order. The schedule is ops[0]'s.
Status EmitSiblingReductions(const std::vector<const RedOp*>& ops, size_t k, const RedSchedule& want,
                             const ReductionPrologue& pro, std::string* src);

// The Python helper `_ax_coop_launch` that split-row (coop) launchers call:
// generated once per file, after the imports (it needs os, torch, triton).
const char* CoopLaunchHelper();
// _ax_nanmax / _ax_nanmin (x, axis): tl.max / tl.min that keep NaN, as
// PyTorch's amax / amin do; emitted once where a kernel calls them.
const char* NanMinMaxHelpers();

// Triton lines (at depth 0) applying norm op to the elements at `offs`
// (under `mask`): they read x<sfx>, mean<sfx>, var<sfx>, w<sfx>, b<sfx> and
// the constexpr HAS_B<sfx>, and leave the result in y<sfx>.
std::string NormApplyLines(const RedOp& op, const std::string& sfx);

}  // namespace ax::builtin
