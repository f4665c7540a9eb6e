// Reductions fused with their neighbours (reduce_fusion.cpp), the pieces
// codegen hands to the reduction emitters: prologues, epilogues, sibling
// inputs, and the matrix-vector form of a reduction over a Linear's output.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "builtin/fuse.h"
#include "builtin/graph.h"
#include "builtin/reduce.h"
#include "builtin/schedule.h"
#include "common/status.h"

namespace ax::builtin {

// Group grp (one output) computed inside a reduction's kernel in place of
// loading its input: the launcher takes the group's inputs, the kernel loads
// them at the reduction's flat index.
Status MakePrologue(const Graph& g, const Group& grp, ReductionPrologue* out);

// Group grp as the epilogue of the reduction whose value is node `value`,
// after group pre (on the value alone, computed once per row) when given;
// `loaded`: inputs the reduction's kernel already holds (node -> variable),
// which the split-row form reuses.
Status MakeRedEpilogue(const Graph& g, const Group* pre, const Group& grp, const std::string& value,
                       const std::map<std::string, std::string>& loaded, ReductionEpilogue* out);

// The values sibling reductions read, computed in one kernel: the union of
// their prologue groups (pro[j], or the input direct[j] read as it is) with
// each shared input loaded once; *inputs: the launcher's inputs in order.
Status MakeSiblingPrologue(const Graph& g, const std::vector<const Group*>& pro, const std::vector<std::string>& direct,
                           const std::vector<int64_t>& shape, ReductionPrologue* out,
                           std::vector<std::string>* inputs);

// The launcher `_ax_linred<k>(x, mod, operands...)`: torch calls (a
// matrix-vector product and sums of parameters) computing lr's reduction.
std::string EmitLinearReduce(const Graph& g, const LinearReduce& lr, const RedOp& op, size_t k);

}  // namespace ax::builtin
