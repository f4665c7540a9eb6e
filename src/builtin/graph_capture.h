// CUDA graph capture of a generated forward (plan cuda_graph): the Python
// helper that replays ModelNew's forward from a CUDA graph, and the counts
// the proposer decides with. A replay launches the whole forward at the cost
// of one launch; every call still copies its inputs into the graph's own
// buffers (that copy is part of the timed call) and returns clones of the
// graph's outputs, so no call can see another's values.
#pragma once

#include <cstdint>
#include <string>

#include "builtin/graph.h"
#include "builtin/schedule.h"

namespace ax::builtin {

// The helper's source: `_ax_graphed(module, forward, args[, stale])` runs forward(*args)
// from a CUDA graph captured on the first call with that input signature
// (shapes, strides, dtypes, device and the non-tensor arguments), after two
// warm-up calls (Triton's compilation and the libraries' workspaces happen
// outside the capture). Inputs not all on one CUDA device, or a call made
// while another capture is under way, run the forward as it is. A forward
// that cannot be captured (a host synchronisation inside it) raises with the
// capture's error. `stale()`, where given, says that data the graph read was
// rewritten since (a packed weight whose weight was written in place): the
// forward is captured again.
const char* CudaGraphHelper();

// The launches PyTorch makes for node n of g: none for views, shape
// questions and getitem of a tuple; for an LSTM, GRU or RNN module one per
// time step, layer and direction (its input's sequence length, num_layers,
// bidirectional); else one.
int OperatorLaunches(const Graph& g, const Node& n);

// The kernel launches one call of the forward makes under schedule s: its
// Triton kernels, plus the operators left to PyTorch (OperatorLaunches).
int ForwardLaunches(const Graph& g, const FusedSchedule& s);

// The bytes of the tensors the forward's operators write (views excluded),
// under no plan: how much work its launches share.
int64_t ForwardOutputBytes(const Graph& g);

// A plan's graphed variant is offered as a large step, before any
// measurement, for a forward of at least kGraphMinLaunches launches that
// write less than kGraphMaxBytesPerLaunch each on average: kernels of a few
// microseconds, as long as their launches (a network's forward at a small
// batch). Otherwise a small step offers it only where the parent's profile
// shows the GPU idle between launches.
inline constexpr int kGraphMinLaunches = 8;
inline constexpr int64_t kGraphMaxBytesPerLaunch = int64_t{16} << 20;

// A parent whose kernels kept the GPU busy for less than this share of its
// measured time spends the rest launching: its graphed variant is the first
// small step.
inline constexpr double kGraphBusyShare = 0.8;

}  // namespace ax::builtin
