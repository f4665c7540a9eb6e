// Convolutions generated in Triton as implicit GEMMs (plan `conv`), with the
// elementwise kernel after them fused in as an epilogue, as GEMMs do.
//
// An `nn.Conv{1,2,3}d` or `nn.ConvTranspose{1,2,3}d`, or its functional
// form `F.conv*` (zero padding, any
// stride, padding, dilation, groups, output padding, with or without bias) on
// a float32 input [B, Cin, spatial...] is, for each group g,
//   C[m, n] = sum_k A[m, k] * B[k, n]
// with m = (batch, output position), n = output channel of g and
// k = (input channel of g, kernel tap). A is gathered from the input on the
// fly (out-of-range taps read as zero through masks; a transposed
// convolution gathers the inputs whose stride grid hits the output), B is
// the weight read in place. Products use split-TF32 ("tf32x3"), fp32
// accumulation, like the GEMMs (gemm.h). The output is stored in the
// module's own layout, so the epilogue and every later operator see the
// tensor PyTorch would produce.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/graph.h"
#include "builtin/pywriter.h"
#include "common/status.h"

namespace ax::builtin {

// True when node n is a convolution the compiler generates (a module, or the
// functional F.conv{1,2,3}d / F.conv_transpose{1,2,3}d on a weight node); fills
// op's convolution geometry and its GEMM view (M, N per group, K per group).
bool ClassifyConv(const Graph& g, const Node& n, GemmOp* out);

// A first tile configuration for a convolution: BN from the channels per
// group, BK from the reduction length, BM from the output positions.
GemmSchedule DefaultConvSchedule(const GemmOp& op);

// True when the kernel walks k tap by tap over blocks of input channels
// (16 or more input channels per group), reading the input channels-last, or
// as it is under plan conv_native; else k = (channel, tap) is one flattened
// index over the input as it is.
bool ConvTapMajor(const GemmOp& op);

// True for a forward convolution with one input channel per group
// (depthwise, any channel multiplier): its kernel accumulates tap by tap with
// fp32 FMAs over a [BM output rows, BN output channels of the group] tile (K
// is only the taps, too short for tensor cores), and its BM may reach 4096
// and its BN go down to 1.
bool ConvDirect(const GemmOp& op);
// Whether s is a tile op's kernel takes: ValidForDot, or for a direct
// convolution Valid with at most 8192 accumulators.
bool ConvScheduleValid(const GemmOp& op, const GemmSchedule& s);

// Launches of op's kernel: one per output phase of a transposed convolution
// strided along some dimension (its outputs taken by residue of the stride),
// else one.
int64_t ConvPhases(const GemmOp& op);
// Output rows of one image in one launch of op's kernel: its output
// positions, or a phase's share of them.
int64_t ConvRowsPerImage(const GemmOp& op);

// The Triton kernel and the launcher `_ax_gemm<k>(x, weight, bias[, the
// epilogue's other inputs])` for convolution op (bias None: none), as
// EmitGemm describes (a column reduction reduces the output channels; with
// norm statistics, conv_stats.h, the launcher returns (mean, var) last).
Status EmitConv(const Graph& g, const Node& conv, const GemmOp& op, size_t k, const GemmSchedule& sched,
                const Group* epilogue, std::string* src, const ColumnTail* column = nullptr,
                const ConvStatsTail* stats = nullptr, const StoreRemaps* remaps = nullptr);

}  // namespace ax::builtin
