// Catalogue: the PyTorch layers and activations that synthesised tasks are
// made of, with the input ranks each accepts, how each changes the shape of
// its input, and the ranges its parameters are drawn from.
//
// The table is data (kind, category, ranks, readable rules); InferShape is
// the one place that computes an operator's output shape, so the composer and
// the LLM prompt describe the same operators.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace ax::adapt {

using Shape = std::vector<int64_t>;

enum class OpCategory { kLayer, kNorm, kPool, kActivation, kElementwise, kReduction, kReshape };
const char* OpCategoryName(OpCategory c);

struct OpSpec {
  std::string kind;          // "Conv2d"; also the name used in task file names
  OpCategory category;
  std::vector<int> ranks;    // input ranks it accepts
  std::string torch;         // how PyTorch spells it
  std::string shape_rule;    // output shape as a function of the input's
  std::string params;        // parameters and the ranges they are drawn from
};

// Every operator, in a fixed order.
const std::vector<OpSpec>& Catalogue();
// nullptr when `kind` is not in the catalogue.
const OpSpec* FindOp(const std::string& kind);
// One line per operator ("Conv2d: nn.Conv2d(...); (N, C, H, W) -> ...; params"),
// as the synthesis prompt shows them.
std::string DescribeOp(const OpSpec& op);

// One operator with its parameters, e.g. {"kind": "Conv2d", params:
// {"out_channels": 16, "kernel_size": 3, "stride": 1, "padding": 1}}.
// Reductions and softmax take "dim" (non-negative) and "keepdim"; pools
// "kernel_size" or "output_size"; scalar ops "value"; Clamp "min"/"max";
// ResidualAdd "from" (the index of the earlier tensor it adds).
struct OpInstance {
  std::string kind;
  nlohmann::json params = nlohmann::json::object();
};

// The output shape of `op` applied to a tensor of shape `in`, or an error
// saying why the input does not fit (wrong rank, a dimension too small, a
// channel count a group count does not divide, ...).
Status InferShape(const OpInstance& op, const Shape& in, Shape* out);

std::string ShapeString(const Shape& s);  // "(8, 16, 32, 32)"
int64_t NumElements(const Shape& s);

}  // namespace ax::adapt
