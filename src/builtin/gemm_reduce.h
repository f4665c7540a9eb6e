// Reductions over a GEMM's or convolution's output columns, and poolings of
// a convolution's output, computed in its kernel (plan `gemm_reduce`).
//
// A sum, mean, max, min, logsumexp, softmax or log_softmax over the N
// columns of a matrix product's output (its last dimension), or over a
// convolution's output channels (dimension 1), read only by that reduction
// (directly or through the GEMM's elementwise epilogue), runs on the
// accumulator tile when one tile holds every column (N up to 256; a
// convolution of one group). A sum, mean, max, min or logsumexp then stores
// one value per row instead of the [M, N] output, which is never written
// nor read back; a softmax stores its tile once. The elementwise group that
// alone reads the reduction's value (tanh(min(...)), sigmoid(softmax(...) +
// b)) runs there too, before the one store.
//
// A max or average pooling over every spatial dimension of a convolution's
// output in disjoint windows (kernel = stride, no padding, dilation 1, floor
// mode) of 2 to 64 positions, a power of two, runs there too: the kernel's
// rows are ordered window by window (conv.h), so a [BM, BN] tile holds BM / W
// whole windows of W positions; it reduces them and stores the pooled tensor
// (positions past the last whole window are never computed).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "builtin/fuse.h"
#include "builtin/gemm.h"
#include "builtin/graph.h"
#include "builtin/pywriter.h"
#include "builtin/reduce.h"

namespace ax::builtin {

// The widest output a column reduction takes: one tile of BN columns.
inline constexpr int64_t kColumnReductionMaxN = 256;

// Whether r reduces exactly op's columns (its last dimension; a
// convolution's channels) with a kind the GEMM's kernel computes, and one
// tile can hold them.
bool ReducesColumns(const RedOp& r, const GemmOp& op);

// The widest pooling window a convolution's kernel reduces.
inline constexpr int64_t kPoolWindowMax = 64;
// Whether r pools convolution op's output in windows its kernel's tiles hold
// (above); not a transposed convolution computed by output phase.
bool PoolsWindows(const RedOp& r, const GemmOp& op);
// Output positions per window of a pooling (the product of its kernel).
int64_t PoolWindowSize(const RedOp& r);
// ReducesColumns or PoolsWindows: r runs in op's kernel.
bool ReducesInTile(const RedOp& r, const GemmOp& op);

// A reduction over a GEMM's columns, computed in its kernel, and the group
// run on its value there (none: post == kNoPost).
inline constexpr size_t kNoPost = static_cast<size_t>(-1);
struct ColumnFusion {
  size_t red = 0;
  size_t post = kNoPost;
  bool has_post() const { return post != kNoPost; }
};

// GEMM -> the reduction computed in its kernel: r reads the GEMM's output
// (no epilogue) or its epilogue group's one output, and nothing else reads
// that tensor; post is the group, of the reduction's output shape and not in
// taken, that alone reads the reduction. Reductions in skip are left alone.
std::map<size_t, ColumnFusion> FormColumnReductions(const Graph& g, const std::vector<Group>& groups,
                                                    const std::vector<std::pair<int, RedOp>>& reds,
                                                    const std::vector<std::pair<int, GemmOp>>& gemms,
                                                    const std::map<size_t, size_t>& epilogue_of,
                                                    const std::set<size_t>& taken, const std::set<size_t>& skip);

// s with BN widened (or narrowed) to hold all of op's columns in one tile;
// BK and then the stages shrink while the tiles overflow shared memory. For a
// pooling r: BM raised to one window at least, the rest as it is.
GemmSchedule WithColumnTile(GemmSchedule s, const GemmOp& op, const RedOp& r);

// What a GEMM's kernel computes after its epilogue: the reduction over its
// columns (node: the reduction's graph node) and the group run on its value.
struct ColumnTail {
  const RedOp* op = nullptr;
  std::string node;
  const Group* post = nullptr;
};

// Where a GEMM kernel stores a column reduction: `rows` the [BM] flat index
// of each tile row's value in the output, `rmask` the rows it stores, `cols`
// the [1, BN] columns that hold data. A softmax stores at the tile's `offs`
// under `mask`. A pooling: `window` positions per window (consecutive rows),
// `rows` the [BM / window, BN] offsets of the pooled values and `rmask` their
// mask.
struct ColumnStore {
  ColumnTail tail;
  std::string rows, rmask, cols;
  std::string noun = "columns";  // what the columns are, for the kernel's comment
  int64_t window = 0;
};

// Kernel lines reducing `value` ([BM, BN]) over its columns as cs.tail.op
// does, running cs.tail.post on the result (its other inputs pin<i>) and
// storing the result (or post's outputs, out<i>). The columns are the
// reduction's row length.
Status EmitColumnReduction(const Graph& g, const ColumnStore& cs, const std::string& value, PyWriter* w);

// "<kind> over <noun>[, then <the post group's operators>]", for a kernel's comment.
std::string ColumnTailDescription(const ColumnTail& tail, const std::string& noun);

// The launcher's parameters for the post group's other inputs (", pin<i>"
// each; "" without a tail or a post group), and their prelude lines.
std::string ColumnPostSignature(const ColumnTail* tail);
void ColumnPostPrelude(const Graph& g, const ColumnTail* tail, PyWriter* w);

// The shape the GEMM's launcher returns with tail: post's, else the reduction's.
std::vector<int64_t> ColumnOutShape(const ColumnTail& tail);
// How many outputs the launcher returns with tail.
size_t ColumnOutputs(const ColumnTail& tail);

}  // namespace ax::builtin
