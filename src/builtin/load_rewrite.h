// Helpers shared by the rewrites applied to a trace at load (graph.cpp's
// LowerAtLoad and the lowerings it calls): trace nodes as JSON in, rewritten
// nodes out.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ax::builtin {

// The tensor a node argument names among the nodes lowered so far: true and
// its shape and dtype, false when it names no tensor.
bool TensorOf(const nlohmann::json& lowered, const nlohmann::json& arg, std::vector<int64_t>* shape,
              std::string* dtype);

// A node name `<base>_<suffix>` not yet taken (recorded in *names).
std::string FreshName(std::set<std::string>* names, const std::string& base, const std::string& suffix);

// A two-operand torch.einsum of float32 tensors (no ellipsis, no index
// repeated within an operand, none summed over one operand alone, at least
// one contracted index and one free index on each side: not an outer or a
// matrix-vector product, whose GEMM tiles would be mostly empty) becomes a
// matrix product the compiler generates: each operand permuted to (batch,
// free, contracted) or (batch, contracted, free) indices and reshaped to
// [B, M, K] and [B, K, N] (no permute or reshape where it would change
// nothing; without batch indices, [M, K] and [K, N]), torch.bmm or
// torch.matmul, then reshaped and permuted to the output's indices. The last
// node keeps the einsum's name. False (the node unchanged) otherwise.
bool LowerEinsum(const nlohmann::json& jn, const nlohmann::json& out, std::set<std::string>* names,
                 nlohmann::json* lowered);

}  // namespace ax::builtin
