// Pieces of hand-written traces shared by the builtin compiler's tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ax::builtin::test_graphs {

// A node's `out` entry: a tensor of that shape and dtype.
inline nlohmann::json T(std::vector<int64_t> shape, const std::string& dtype = "torch.float32") {
  return {{"kind", "tensor"}, {"shape", shape}, {"dtype", dtype}};
}
// An argument that is the value of node n.
inline nlohmann::json N(const std::string& n) { return {{"node", n}}; }

// A call_module's `module` entry for nn.Linear(in, out[, bias]) in float32.
inline nlohmann::json LinearModule(int64_t in, int64_t out, bool bias) {
  nlohmann::json params = {{"weight", {{"shape", {out, in}}, {"dtype", "torch.float32"}}}};
  if (bias) params["bias"] = {{"shape", {out}}, {"dtype", "torch.float32"}};
  return {{"class", "Linear"},
          {"attrs", {{"in_features", in}, {"out_features", out}, {"bias", bias}}},
          {"params", params}};
}

}  // namespace ax::builtin::test_graphs
