// Task signatures: what makes two synthesised tasks the same, for
// deduplication. Two views: the normalised source (comments, docstrings,
// layout and every number removed, so tasks that differ only in sizes or
// wording match) and the operator signature (the input ranks, the ordered
// operator kinds of forward() and the output ranks, so tasks that compute the
// same chain in different words match).
//
// Both read the Python source as text; nothing here runs it.
#pragma once

#include <string>
#include <vector>

namespace ax::adapt {

std::string NormaliseSource(const std::string& source);

// The operators forward() applies, in the order they appear: catalogue kinds
// where known ("Conv2d", "GELU", "Add"), reductions and softmax with their dim
// ("Mean(1)", "Sum(1,k)" for keepdim), other calls by their own name.
std::vector<std::string> ForwardOps(const std::string& source);

// The rank of each tensor get_inputs() creates with torch.rand/randn/...
std::vector<int> InputRanks(const std::string& source);

// "in[4] Conv2d>GroupNorm>GELU>Mean(1) out[3]"; outputs_json is the judge's
// [{"shape": [...], "dtype": "float32"}, ...] (may be empty: no out part).
std::string TaskSignature(const std::string& source, const std::string& outputs_json);

// Bytes of the outputs outputs_json describes; -1 when it cannot be read.
long long OutputBytes(const std::string& outputs_json);

}  // namespace ax::adapt
