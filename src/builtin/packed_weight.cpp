#include "builtin/packed_weight.h"

namespace ax::builtin {

const char* PackedWeightHelper() {
  return R"PY(_ax_packs = {}


def _ax_packed_weight(weight, pack):
    # pack(weight) (a tensor, or a tuple of them), computed again only when a
    # weight is another tensor or was written in place since (its version
    # counter moved); one entry per call site (pack's code), so dropped
    # weights are not kept; the packed copy takes no part in autograd, like
    # the kernels that read it
    ws = weight if isinstance(weight, tuple) else (weight,)
    versions = tuple(t._version for t in ws)
    hit = _ax_packs.get(pack.__code__)
    if (hit is not None and hit[1] == versions and len(hit[0]) == len(ws)
            and all(r() is t for r, t in zip(hit[0], ws))):
        return hit[2]
    with torch.no_grad():
        packed = pack(weight)
    _ax_packs[pack.__code__] = (tuple(weakref.ref(t) for t in ws), versions, packed)
    return packed


def _ax_packs_stale():
    # a packed weight whose weights, still alive, were written in place since:
    # a CUDA graph that read the packed copy must be captured again
    for refs, versions, _ in _ax_packs.values():
        ws = tuple(r() for r in refs)
        if all(t is not None for t in ws) and tuple(t._version for t in ws) != versions:
            return True
    return False


)PY";
}

}  // namespace ax::builtin
