// Pieces of hand-written traces shared by the builtin compiler's tests.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace ax::builtin::test_graphs {

// A call_module's `module` entry for nn.Linear(in, out[, bias]) in float32.
inline nlohmann::json LinearModule(int64_t in, int64_t out, bool bias) {
  nlohmann::json params = {{"weight", {{"shape", {out, in}}, {"dtype", "torch.float32"}}}};
  if (bias) params["bias"] = {{"shape", {out}}, {"dtype", "torch.float32"}};
  return {{"class", "Linear"},
          {"attrs", {{"in_features", in}, {"out_features", out}, {"bias", bias}}},
          {"params", params}};
}

}  // namespace ax::builtin::test_graphs
