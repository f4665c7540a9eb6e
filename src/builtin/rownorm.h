// Row norms generated in Triton: RMSNorm (`F.rms_norm`, `torch.rms_norm`,
// `nn.RMSNorm`) over the trailing dimensions of a float32, float16 or
// bfloat16 tensor, with or without a weight.
//
// Three stages, each its own function:
// - lowering (ClassifyRowNorm): a traced node to a RowNormOp, the operator's
//   data (rows, row length, dtype, eps, where the weight comes from);
// - scheduling (RowNormSchedule, DefaultRowNormSchedule, RowNormNeighbours):
//   the strategy and its knobs. Strategies are large-step choices: the whole
//   row in registers (one row per program, read once), several short rows
//   per program, or a split row (one row per program walked in chunks: the
//   sum of squares, then a second pass that re-reads the chunks, mostly from
//   L2, to scale them). The knobs are small steps: rows per program, chunk,
//   warps (with the tile they set the vector width, tile / (32 x warps)
//   elements per thread) and pipeline stages of the chunk loops;
// - emission (EmitRowNorm): the kernel and its launcher, through PyWriter.
//
// Loads and stores are in the tensor's dtype; the arithmetic is float32 (the
// values are widened after the load and rounded once at the store), as
// PyTorch's own rms_norm computes in its accumulation type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/graph.h"
#include "common/status.h"

namespace ax::builtin {

struct RowNormOp {
  std::string input;          // the node x
  std::string out_dtype;      // the node's dtype ("torch.bfloat16", ...)
  std::vector<int64_t> shape; // x's (and the output's) shape
  int64_t rows = 0, H = 0;    // rows and their length (the normalised dimensions' product)
  double eps = 0;             // None resolved to the dtype's epsilon, as PyTorch does
  // The weight: none, a node of the graph (F.rms_norm's argument), or the
  // module's own (`<module>.weight`).
  enum class Weight { kNone, kNode, kModule } weight = Weight::kNone;
  std::string weight_ref;     // the node's name or the module's path
  int ElementBytes() const { return out_dtype == "torch.float32" ? 4 : 2; }
};

enum class RowNormStrategy { kWholeRow, kMultiRow, kSplitRow };
const char* RowNormStrategyName(RowNormStrategy s);  // "whole", "rows", "split"

struct RowNormSchedule {
  RowNormStrategy strategy = RowNormStrategy::kWholeRow;
  int rows = 1;     // rows per program (kMultiRow; 1 otherwise)
  int block = 0;    // kSplitRow: the chunk; otherwise the row's power-of-two tile
  int warps = 4;
  int stages = 1;   // kSplitRow: software-pipeline depth of the chunk loops
  bool operator==(const RowNormSchedule&) const = default;

  nlohmann::json ToJson() const;  // ["whole"|"rows"|"split", rows, block, warps, stages]
  static Status FromJson(const nlohmann::json& j, RowNormSchedule* out);
  // Whether the schedule can run op (tile sizes, register budget).
  bool ValidFor(const RowNormOp& op) const;
  std::string Describe() const;  // "split row, chunk 1024, 4 warps, 2 stages"
};

// Lowering: true when node n is a row norm the compiler generates.
bool ClassifyRowNorm(const Graph& g, const Node& n, RowNormOp* out);

// Scheduling: the strategy's starting point for op; false when the strategy
// does not apply (a row too long for registers, rows too long to share a
// program, a row too short to split).
bool DefaultRowNormSchedule(const RowNormOp& op, RowNormStrategy s, RowNormSchedule* out);
// The strategies that apply to op, the expected best first (the default plan's).
std::vector<RowNormStrategy> RowNormStrategies(const RowNormOp& op);
// Schedules one knob away from s (halved or doubled; stages by one), valid
// for op, in the order a small step tries them.
std::vector<RowNormSchedule> RowNormNeighbours(const RowNormOp& op, const RowNormSchedule& s);

// Emission: `_ax_rnorm<k>_kernel` and the launcher `_ax_rnorm<k>(x[, w])`
// returning the normalised tensor, appended to *src.
Status EmitRowNorm(const RowNormOp& op, size_t k, const RowNormSchedule& s, std::string* src);

}  // namespace ax::builtin
