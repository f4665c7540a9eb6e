// Reductions over a GEMM's or convolution's output columns computed in its
// kernel (plan `gemm_reduce`).
//
// A sum, mean, max, min or logsumexp over the N columns of a matrix
// product's output (its last dimension), or over a convolution's output
// channels (dimension 1), read only by that reduction (directly or through
// the GEMM's elementwise epilogue), runs on the accumulator tile when one
// tile holds every column (N up to 256; a convolution of one group): the
// kernel stores one value per row instead of the [M, N] output, which is
// never written nor read back. `torch.min(conv(x), dim=1, keepdim=True)[0]`
// is one kernel that writes B x H x W values.
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

// GEMM -> the reduction computed in its kernel: r reads the GEMM's output
// (no epilogue) or its epilogue group's one output, and nothing else reads
// that tensor. Reductions in skip are left alone.
std::map<size_t, size_t> FormColumnReductions(const Graph& g, const std::vector<Group>& groups,
                                              const std::vector<std::pair<int, RedOp>>& reds,
                                              const std::vector<std::pair<int, GemmOp>>& gemms,
                                              const std::map<size_t, size_t>& epilogue_of,
                                              const std::set<size_t>& skip);

// s with BN widened (or narrowed) to hold all of op's columns in one tile;
// BK and then the stages shrink while the tiles overflow shared memory.
GemmSchedule WithColumnTile(GemmSchedule s, const GemmOp& op);

// Where a GEMM kernel stores a column reduction: `rows` the [BM] flat index
// of each tile row's value in the output, `rmask` the rows it stores, `cols`
// the [1, BN] columns that hold data.
struct ColumnStore {
  const RedOp* op = nullptr;
  std::string rows, rmask, cols;
  std::string noun = "columns";  // what the columns are, for the kernel's comment
};

// Kernel lines reducing `value` ([BM, BN]) over its columns as cs.op does and
// storing the result at out0 + cs.rows.
void EmitColumnReduction(const ColumnStore& cs, int64_t n, const std::string& value, PyWriter* w);

}  // namespace ax::builtin
