// Fusion: which traced nodes are elementwise operators the builtin compiler
// can generate (everything else stays a PyTorch call), and how they are
// grouped into kernels.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "builtin/graph.h"

namespace ax::builtin {

// One elementwise operator in canonical form: fn over operands, each a node
// (a float32 tensor broadcastable to the node's shape) or a numeric constant.
struct EwOperand {
  std::string node;     // empty for a constant
  double value = 0.0;
};

struct EwOp {
  std::string fn;                     // add, sub, mul, div, relu, gelu, clamp, ...
  std::vector<EwOperand> operands;
  std::map<std::string, double> params;  // alpha, negative_slope, min, max, beta, threshold, ...
  std::string variant;                // gelu: "none" | "tanh"
};

// True when node is an elementwise operator the compiler generates, in float32.
bool ClassifyElementwise(const Graph& g, const Node& n, EwOp* out);

// `x.device` (getattr(x, 'device')): generated code takes any input's device
// instead, so it neither breaks a fused run nor makes x a kernel output.
bool IsDeviceOf(const Node& n);

// torch.tensor(<number>[, device=..., dtype=torch.float32]): operands read it
// as the number; it does not break a fused run.
bool IsScalarConstant(const Node& n, double* value);

// How the fusible nodes are grouped.
struct FusionOptions {
  bool singleton = false;             // one kernel per operator
  std::set<std::string> cuts;         // a group ends after each of these nodes
};

struct Group {
  std::vector<int> nodes;             // node indices, in order
  std::map<int, EwOp> ops;            // node index -> its operator
  std::vector<std::string> inputs;    // nodes read from outside the group, first use first: tensors
                                      // and runtime scalars (number placeholders)
  std::vector<std::string> outputs;   // group nodes read outside the group
  std::vector<int64_t> shape;         // the output shape of every node in the group
  std::string dtype = "torch.float32"; // and their dtype (float32, float16 or bfloat16)
  int64_t numel() const;
};

// Maximal runs of fusible nodes with the same output shape and dtype (placeholders and
// attributes do not break a run; any other node does), split at the cuts.
std::vector<Group> FormGroups(const Graph& g, const FusionOptions& opt);

}  // namespace ax::builtin
