// Norm statistics computed in a convolution's kernel (plan `conv_stats`).
//
// A group, instance, layer or batch norm (training statistics) that alone
// reads a convolution's output (directly, or as the one output of the
// convolution's elementwise epilogue) normalises rows that are whole images'
// channel blocks (group, instance and layer norm: rows N x G, each over C/G
// channels of one image) or whole channels (batch norm: one row per channel,
// over every image). The convolution's kernel already holds each output
// tile [BM output positions, BN channels] in registers, so it also writes
// each tile's count, mean and sum of squared deviations (M2) per channel,
// one partial per image the tile's rows belong to (BM is at most an image's
// rows, so a tile spans two images at most). A merge kernel combines a row's
// partials (Chan's parallel formula: exact, no cancellation between large
// sums) into its mean and biased variance, and the norm's apply reads the
// output once. Without this, a statistics kernel reads the whole output
// first: one pass over the largest tensor of the forward less. A mean over
// every position of each image's channels (a global average pool) takes the
// merged means as its result, and the convolution's output is not stored at
// all: two passes less. A direct
// (depthwise) convolution, conv.h's ConvDirect, does not take part.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "builtin/conv.h"
#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/graph.h"
#include "builtin/pywriter.h"
#include "builtin/reduce.h"

namespace ax::builtin {

// How a norm's rows cover a convolution's output [N, C, spatial...]:
// groups > 0: row n * groups + j is image n's channels [j * C/groups,
// (j + 1) * C/groups) (instance norm: groups = C; layer norm over every
// dimension but the batch: groups = 1); groups == 0: row c is channel c over
// every image (batch norm).
struct NormRows {
  int64_t groups = 1;
  bool per_channel() const { return groups == 0; }
};

// Whether norm r's rows are whole channel blocks of op's output (the layout
// above); *rows (when given) says how.
bool NormRowsOf(const RedOp& r, const GemmOp& op, NormRows* rows);

// Whether r is a mean of op's output over every spatial dimension (a global
// average pool: one value per image and channel). Its rows are instance-norm
// rows (groups = C): the merged partial means are its result, and the
// convolution's output is then never stored.
bool IsSpatialMean(const RedOp& r, const GemmOp& op);
// NormRowsOf, or IsSpatialMean (rows->groups = C): r takes its statistics
// from op's kernel.
bool StatsRowsOf(const RedOp& r, const GemmOp& op, NormRows* rows);

// Convolution -> the norm (or spatial mean) whose statistics its kernel computes: the norm
// reads the convolution's output (no epilogue) or its epilogue group's one
// output, nothing else reads that tensor, and an image holds at least 16 of
// the kernel's rows. Reductions in skip are left alone.
std::map<size_t, size_t> FormConvStats(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, RedOp>>& reds,
                                       const std::vector<std::pair<int, GemmOp>>& gemms,
                                       const std::map<size_t, size_t>& epilogue_of, const std::set<size_t>& skip);

// s with BM at most an image's rows (so that a tile spans two images at
// most).
GemmSchedule WithStatsTile(GemmSchedule s, const GemmOp& op);

// What the kernel of op writes the statistics for.
struct ConvStatsTail {
  const RedOp* norm = nullptr;
  NormRows rows;
};

// The launcher `_ax_red<k>(x, st)` of a spatial mean (IsSpatialMean) whose
// statistics st = (mean, var) a convolution's kernel computed: the means in
// op's output shape (x, the unwritten output, is not read).
Status EmitMeanFromStatistics(const RedOp& op, size_t k, std::string* src);

// The partial buffers' slots: two per tile (the images of its first and of
// its last row), tiles numbered phase by phase.
int64_t StatsSlots(const GemmOp& op, const GemmSchedule& s);

// Kernel lines after the output's store: per channel of the tile, the
// count, mean and M2 of `value` ([BM, BN]) over the valid rows of each of
// the (at most two) images the tile holds, stored at the tile's two slots of
// the partials pc, pm, pq ([slots, C]). They read the kernel's rm, rn, co,
// nb, pid_m, M and NG (and orow and the launch's phase PHI when phased).
void EmitTileStatistics(const GemmOp& op, bool phased, const std::string& value, PyWriter* w);

// The merge kernel `_ax_gemm<k>_stats_merge` (appended to *src): one program
// per norm row, its mean and biased variance from the partials.
void EmitStatsMerge(const GemmOp& op, const GemmSchedule& s, const ConvStatsTail& tail, size_t k, std::string* src);

// Launcher lines: the partials' allocation (before the launch), and after it
// the merge into `mean` and `var` (one value per norm row).
void EmitStatsAlloc(const GemmOp& op, const GemmSchedule& s, PyWriter* w);
void EmitStatsMergeCall(const GemmOp& op, const GemmSchedule& s, const ConvStatsTail& tail, size_t k, PyWriter* w);

}  // namespace ax::builtin
