// Weights packed once and kept across calls: the Python helper
// `_ax_packed_weight(weight, pack)` that generated launchers call to lay a
// module's weights out for their kernels (a tap-major convolution's
// [groups, taps, Cin, Cout] weight, a recurrent module's gate blocks)
// without a copy per call.
#pragma once

namespace ax::builtin {

// The helper's source: pack(weight) for a tensor or a tuple of tensors,
// computed again only when one of them is another tensor or its version
// counter moved (an in-place write, load_state_dict); one entry per call
// site, so that dropped weights are not kept. `_ax_packs_stale()` says
// whether a packed weight's weights were written in place since it was
// packed: a CUDA graph that replays a read of the packed copy (plan graph)
// is then captured again.
const char* PackedWeightHelper();

}  // namespace ax::builtin
