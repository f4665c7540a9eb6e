// Recurrent modules generated in Triton (plan `recurrent`): an `nn.GRU`,
// `nn.LSTM` or `nn.RNN` left whole by the tracer (its unrolled cells would
// exceed the lowering budget) becomes one Triton kernel launched once per
// step. A program computes BJ hidden units of one (layer, direction) for a
// block of the batch: both projections of its gates (the input's and the
// previous hidden state's, split-TF32 products with fp32 accumulation, as the
// GEMMs do) and the cell update after them, in registers, storing only the
// new hidden state (and, for an LSTM, the cell state in place).
//
// A unidirectional stack runs as a wavefront: launch w computes step w - l of
// every layer l at once (layer l's input at step t is layer l - 1's output,
// computed by the previous launch), so L layers over T steps take T + L - 1
// launches instead of T * L. A bidirectional stack runs layer by layer, both
// directions in one launch; there, by default, a layer's input projections for
// every step are one tiled product (`_ax_rnn_proj<k>`) before its steps, so
// that a step computes only the hidden one. The weights are packed once per
// weight version into [layers, directions, gates * hidden, K] blocks
// (PackedWeightHelper).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builtin/graph.h"
#include "common/status.h"

namespace ax::builtin {

struct RnnOp {
  std::string mode;  // GRU, LSTM, RNN_TANH or RNN_RELU (PyTorch's module.mode)
  int gates = 1;     // 3 (GRU: r, z, n), 4 (LSTM: i, f, g, o), 1 (RNN)
  int64_t input = 0, hidden = 0, layers = 1, dirs = 1, seq = 0, batch = 0;
  bool batch_first = false;
  bool unbatched = false;  // x is [T, I] and the states [L * D, H]: run as a batch of one
  bool bias = true;
  std::string module;  // the module's attribute path (the node's target)
  std::string x;       // the input node
  std::string h0, c0;  // the initial states' nodes; "" = zeros
  std::vector<int64_t> x_shape;
  // One launch per step computes every layer (unidirectional stacks).
  bool Wavefront() const { return dirs == 1; }
  // Kernel launches per call.
  int64_t Launches() const { return Wavefront() ? seq + layers - 1 : seq * layers; }
};

struct RnnSchedule {
  int bj = 16;     // hidden units per program
  int bk = 32;     // reduction block of both projections
  int bb = 16;     // batch rows per program (at least 16: the products' M)
  int warps = 4;
  int stages = 2;  // software pipelining of the two projection loops
  // Layer by layer (not a wavefront): each layer's input projections
  // computed for all steps first (1), or inside every step (0).
  int pre = 0;
  bool operator==(const RnnSchedule&) const = default;
  bool Valid() const;
  nlohmann::json ToJson() const;
  static Status FromJson(const nlohmann::json& j, RnnSchedule* out);
};

// True when node n is a recurrent module the compiler generates: an nn.GRU,
// nn.LSTM or nn.RNN call on a float32 input [T, B, I] ([B, T, I] with
// batch_first) or [T, I] (unbatched), with given or zero initial states, no projection
// (proj_size 0) and no dropout between layers.
bool ClassifyRnn(const Graph& g, const Node& n, RnnOp* out);

// A first schedule from the sizes: BJ from the hidden size, BB from the
// batch; input projections precomputed where the stack runs layer by layer.
RnnSchedule DefaultRnnSchedule(const RnnOp& op);

// The Triton kernel `_ax_rnn_kernel<k>`, the weight packer `_ax_rnn_pack<k>`
// and the launcher `_ax_rnn<k>(x, h0[, c0], module)`, which returns what the
// module returns: (output, h_n), or (output, (h_n, c_n)) for an LSTM.
Status EmitRnn(const RnnOp& op, size_t k, const RnnSchedule& s, std::string* src);

}  // namespace ax::builtin
