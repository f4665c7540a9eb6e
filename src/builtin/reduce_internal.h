// Helpers shared by the reduction's lowering (reduce_lower.cpp), rewrites
// (reduce_rewrite.cpp), schedule (reduce_schedule.cpp) and emission
// (reduce_emit*.cpp): the trace's argument readers and the geometry's
// predicates. Internal to src/builtin; reduce.h is the public interface.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/graph.h"
#include "builtin/reduce.h"

namespace ax::builtin::red {

inline const std::string kF32 = "torch.float32";

inline int64_t Pow2Ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline std::string I(int64_t v) { return std::to_string(v); }

// An integer argument as the trace writes it ({"value": n}).
bool IntValue(const nlohmann::json* a, int64_t* v);
// An argument that is absent or None.
bool IsNoneArg(const nlohmann::json* a);
// dim: an int, a tuple/list of ints, or None/absent (all dimensions when
// absent_is_all); normalised to sorted, distinct, non-negative dimensions.
bool Dims(const nlohmann::json* a, size_t rank, bool absent_is_all, std::vector<int>* out);
// No keyword arguments but those allowed.
bool OnlyKw(const Node& n, const std::set<std::string>& allowed);
// The float32 tensor node read as argument 0.
const Node* Input(const Graph& g, const Node& n);

// r runs along contiguous memory (one address step per element, or inner
// blocks of 64 or more).
inline bool RContiguous(const Geometry& g) { return (g.IN == 1 && g.S3 == 1) || g.IN >= 64; }
// A reduction over a middle block of dimensions (sum over dim 1 of [B, D1,
// D2]): consecutive rows are consecutive addresses (within one of the
// rows / RD outer blocks), and r steps over whole rows.
inline bool RowsContiguous(const Geometry& g) { return g.IN == 1 && g.S2 == 1 && g.RD > 1 && g.S3 == g.RD; }

// Contiguous rows too long for one tile, in at most 512 chunks (a split-row
// kernel's programs of a row must all be resident at once).
bool CoopRows(const Geometry& g);
// A sum, mean, max or min whose epilogue runs in a split-row kernel: long
// contiguous rows, on by default for a large tensor (want.coop 0), or asked.
bool CoopEpilogue(const RedOp& op, const RedSchedule& want);

}  // namespace ax::builtin::red
