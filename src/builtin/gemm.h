// Matrix products generated in Triton, with the elementwise kernel after them
// fused in as an epilogue (plan `gemm`).
//
// An `nn.Linear` on a float32 input x [..., K] is C = A @ W^T (+ b) with
// A = x viewed as [M, K] and W [N, K]; `torch.matmul`, `torch.mm` and `@` of
// a float32 x [..., K] and a 2-d y [K, N] are C = A @ y. Batched products
// (`torch.bmm`, and `torch.matmul` or `@` of x [B..., M, K] and y [B..., K, N]
// with the same batch dimensions) are one such product per batch, the batch
// on program axis 1. Operands are read through their strides (a transposed
// view is not copied). The kernel tiles C in BM x BN blocks
// (grouped by GROUP_M along M for L2 reuse), walks K in BK steps and
// accumulates in fp32. Products use Triton's "tf32x3" input precision: each
// fp32 operand is split into a TF32 head and a TF32 tail and three
// tensor-core products (head*head + head*tail + tail*head) are summed, which
// keeps about fp32 accuracy (the dropped tail*tail term is below fp32's
// rounding of the operands' product) at tensor-core speed; plain TF32 is never
// used. The elementwise group that alone reads C (same shape) runs on the
// accumulator tile before the one store, so C itself is never written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "builtin/cat_slots.h"
#include "builtin/fuse.h"
#include "builtin/graph.h"
#include "builtin/pywriter.h"
#include "common/status.h"

namespace ax::builtin {

// A convolution's geometry (conv.h); dims == 0 for a matrix product.
struct ConvGeometry {
  int dims = 0;             // spatial dimensions: 1, 2 or 3
  bool transposed = false;  // ConvTranspose: weight [Cin, Cout/groups, k...]
  int64_t batch = 0, cin = 0, cout = 0, groups = 1;
  std::vector<int64_t> in, out, kernel, stride, padding, dilation;  // per spatial dimension
};

struct GemmOp {
  std::string input;   // the node x
  bool linear = true;  // nn.Linear (module) or a matrix product of two tensors (other)
  std::string module;  // the Linear's (or convolution module's) path (its weight and bias)
  std::string weight, bias;  // a functional convolution's weight and bias nodes (bias "": none)
  ConvGeometry conv;   // a convolution (conv.h): M, N and K are per group
  std::string other;   // matmul: the node y
  int64_t M = 0, K = 0, N = 0;  // a batched product's: per batch
  std::vector<int64_t> batch;     // a batched product's batch dimensions (none: not batched)
  bool has_bias = false;
  std::vector<int64_t> in_shape, out_shape;
  // A tap-major convolution reads its input in the input's own (channels-
  // first) layout instead of a channels-last copy (plan conv_native).
  bool conv_native = false;
  bool IsConv() const { return conv.dims > 0; }
  bool Batched() const { return !batch.empty(); }
  int64_t Batch() const;  // the product of the batch dimensions (1 when not batched)
};

struct GemmSchedule {
  int bm = 128, bn = 128, bk = 64, group_m = 8, warps = 8, stages = 3;
  bool operator==(const GemmSchedule&) const = default;
  // Shared memory the pipelined fp32 tiles need (bytes).
  int64_t SharedBytes() const { return int64_t{4} * (bm + bn) * bk * stages; }
  // The ranges any kernel of the family accepts (a plan's schedule parses):
  // BM up to 4096 and BN from 1 (the direct convolutions, conv.h).
  bool Valid() const;
  // What a tl.dot tile needs on top: BM up to 256, BN at least 16.
  bool ValidForDot() const;
};

// A first tile configuration for a batched product: tiles no larger than
// one batch's C needs (16 to 128 along M and N), BK up to 64, 4 warps for
// tiles under 128 x 64.
GemmSchedule DefaultBatchedSchedule(const GemmOp& op);

// True when node n is an nn.Linear on a float32 tensor, a matrix product of
// a float32 tensor and a 2-d one, or a batched product of two float32
// tensors of the same batch dimensions (at most 65535 batches: program axis
// 1), that the compiler generates.
bool ClassifyGemm(const Graph& g, const Node& n, GemmOp* out);

// The kernel lines after the accumulation (at w's depth), where `acc` holds
// the [BM, BN] tile, `offs` its flat output index and `mask` its valid
// elements: without an epilogue the store of acc to out0; with one, its
// other inputs loaded (named in<i>), its operators and the stores of its
// outputs (out<i>). `self` is the epilogue's input that is acc. With a
// column reduction (gemm_reduce.h), the value it reduces (acc, or the
// epilogue's one output) is reduced over the tile's columns and only the
// result is stored, at out0.
struct ColumnStore;
struct ColumnTail;
// *value (when given) names the variable holding the stored tile of the
// epilogue's first output (or acc). store false: the tile is computed but
// not stored (what follows in the kernel reads *value). Outputs in remaps
// are stored into their slice of a concatenation (cat_slots.h).
Status EmitAccumulatorStore(const Graph& g, const Group* epilogue, size_t self, PyWriter* w,
                            const ColumnStore* column = nullptr, std::string* value = nullptr, bool store = true,
                            const StoreRemaps* remaps = nullptr);

// A GEMM kernel's outputs (out<i>): the epilogue's, or C; with a column
// reduction, its value or the outputs of the group after it.
std::vector<std::string> KernelOutputs(const Group* epilogue, const ColumnTail* column);
// Appends a GEMM kernel's other inputs after A, B and the bias: the
// epilogue's other inputs (in<i>, `self` being C), then those of the group
// after a column reduction (pin<i>).
void AppendKernelInputs(const Group* epilogue, size_t self, const ColumnTail* column, std::vector<std::string>* params);

// The Triton kernel and the launcher `_ax_gemm<k>(x, mod or y[, the epilogue's
// other inputs in order])` for op (appended to *src). Without an epilogue the
// launcher returns C; with one (a group reading C, of C's shape, C's only
// readers in it) it returns the group's outputs; with a column reduction
// (gemm_reduce.h: `column`, reading C or the epilogue's one output) it
// takes the group after the reduction's other inputs too and returns the
// reduction's value, or that group's outputs. With norm statistics
// (conv_stats.h, convolutions only) it returns (mean, var) of the norm's rows
// after its outputs. Outputs in remaps are stored into their slice of a
// concatenation, which the launcher takes as dst<i> after its other arguments.
struct ConvStatsTail;
Status EmitGemm(const Graph& g, const Node& linear, const GemmOp& op, size_t k, const GemmSchedule& sched,
                const Group* epilogue, std::string* src, const ColumnTail* column = nullptr,
                const ConvStatsTail* stats = nullptr, const StoreRemaps* remaps = nullptr);

}  // namespace ax::builtin
