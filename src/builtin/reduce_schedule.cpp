// Scheduling of reduction kernels: the tile, split and split-row (coop)
// choices a RedSchedule resolves to for an operator's geometry, and which
// epilogues fit one reduction kernel.
#include <algorithm>

#include "builtin/reduce.h"
#include "builtin/reduce_internal.h"

namespace ax::builtin {

using namespace red;

namespace {
// A norm's split-row kernel holds its chunks a round by default when its rows
// are at most this many 4096-element chunks (the grid, kHeldPerSm programs
// per SM, must have one program per chunk of a row: 660 on an H200).
constexpr int64_t kHeldMaxChunks = 512;
constexpr int kHeldPerSm = 5;
// Big enough that a split-row kernel is the default (its host work, about
// three small allocations and a zero fill, is then noise).
bool CoopByDefault(const Geometry& g) { return g.numel() >= (int64_t{1} << 22); }
}  // namespace

// 528 programs (4 per SM on an H200) hold 512 chunks of a row at once.
bool red::CoopRows(const Geometry& g) { return RContiguous(g) && Pow2Ceil(g.R) > 4096 && CeilDiv(g.R, 16384) <= 512; }

bool red::CoopEpilogue(const RedOp& op, const RedSchedule& want) {
  if (op.kind != "sum" && op.kind != "mean" && op.kind != "amax" && op.kind != "amin") return false;
  return CoopRows(op.geo) && (want.coop > 0 || (want.coop == 0 && CoopByDefault(op.geo)));
}

// A softmax, log_softmax or norm over such rows.
bool CoopFits(const RedOp& op) {
  if (op.kind != "softmax" && op.kind != "log_softmax" && op.kind != "norm") return false;
  return CoopRows(op.geo);
}

RedSchedule ResolveSchedule(const RedOp& op, const RedSchedule& want) {
  RedSchedule s = want;
  if (op.kind == "maxpool" || op.kind == "avgpool") {
    // BLOCK_M output positions per program; the window is a loop.
    s.block_r = 1;
    if (s.block_m <= 0) s.block_m = 512;
    s.block_m = std::min(s.block_m, 4096);
    if (s.warps <= 0) s.warps = 4;
    s.split = 1;
    s.coop = 0;
    return s;
  }
  const Geometry& g = op.geo;
  const bool rc = RContiguous(g);
  const int64_t cap = op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp" ||
                              op.kind == "xent" || op.kind == "cumsum" || op.kind == "cumprod"
                          ? 2048
                          : 4096;
  if (op.kind == "norm" && s.block_r <= 0 && Pow2Ceil(g.R) <= 4096) {
    // the whole row in one block: statistics and apply in one kernel, one read
    s.block_r = static_cast<int>(Pow2Ceil(g.R));
    if (s.block_m <= 0) s.block_m = static_cast<int>(std::min({std::max<int64_t>(1, 4096 / s.block_r), Pow2Ceil(g.rows), int64_t{64}}));
  }
  if ((op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp" || op.kind == "xent") && rc &&
      s.block_r <= 0 && Pow2Ceil(g.R) <= 4096) {
    s.block_r = static_cast<int>(Pow2Ceil(g.R));  // the whole row in one tile: one pass
  }
  s.coop = want.coop < 0 ? -1 : 0;  // kept off when asked to be (a plan's other changes must not turn it on)
  s.lag = want.lag < 0 ? -1 : 0;
  if (CoopFits(op) && (want.coop > 0 || (want.coop == 0 && CoopByDefault(g)))) {
    // Rows longer than a tile: one split-row kernel, each program holding a
    // chunk in registers (H200, best of 9 configurations per shape: softmax
    // over [4096, 393216] 0.80 of copy with 4096-element chunks, 4 warps, 8
    // programs per SM; instance norm over [7168, 262144] 0.86 with 8192, 8
    // warps, 4 per SM; the two-kernel plans reach 0.63-0.67 there).
    const bool sm = op.kind != "norm";
    s.coop = want.coop > 0 ? std::min(want.coop, 32) : (sm ? 8 : 4);
    // A norm's chunks are re-read (lag) only when a plan asks: on an H200
    // (8192-element chunks, 8 warps, 4 per SM, judged as candidates are) it was
    // not reliably faster than holding them: group norm over [896, 2097152]
    // 5.45-5.64 ms re-read, 5.76 held, 5.44 in two kernels; layer norm over
    // [16, 4194304] 0.420-0.454 ms re-read, 0.403 held; instance norm over
    // [7168, 262144] 4.55 ms re-read, 4.35 held.
    //
    // Held a round (lag 2) is the default where rows of 4096-element chunks
    // number at most kHeldMaxChunks (H200, 2026-12-02, generated kernels, GPU
    // busy time: group norm over [896, 2097152] 4.59 ms with 4096 / 4 warps /
    // 5 per SM, 5.28 held in place; instance norm over [7168, 262144] 4.12
    // against 4.22; judged, 35 4.68 ms and 34 4.15 ms).
    if (!sm && want.lag > 0) s.lag = want.lag == 2 ? 2 : 1;
    const bool held = !sm && want.lag == 0 && CeilDiv(g.R, 4096) <= kHeldMaxChunks;
    if (held) {
      s.lag = 2;
      if (want.coop <= 0) s.coop = kHeldPerSm;
    }
    if (s.block_r <= 0) s.block_r = sm || held ? 4096 : 8192;
    s.block_r = std::clamp(s.block_r, 1024, 16384);
    if (CeilDiv(g.R, s.block_r) > 512) s.block_r = static_cast<int>(std::min<int64_t>(16384, Pow2Ceil(CeilDiv(g.R, 512))));
    s.block_m = 1;
    if (s.warps <= 0) s.warps = sm || held ? 4 : 8;
    s.split = 1;
    return s;
  }
  if (RowsContiguous(g)) {
    // rows side by side in memory, r strided: a wide tile along the rows, so
    // a warp reads consecutive addresses. An arg reduction needs 32 loads in
    // flight per lane (H200, [128, 4096, 4095] over dim 1: 256 x 16 ran at
    // 0.55 of copy, 256 x 32 at 0.97).
    const bool arg = op.kind == "argmax" || op.kind == "argmin";
    if (s.block_r <= 0) s.block_r = static_cast<int>(std::min<int64_t>(Pow2Ceil(g.R), arg ? 32 : 16));
    if (s.block_m <= 0) s.block_m = static_cast<int>(std::min<int64_t>(Pow2Ceil(g.RD), 256));
  }
  if (s.block_r <= 0) s.block_r = static_cast<int>(rc ? std::min(Pow2Ceil(g.R), cap) : std::min<int64_t>(Pow2Ceil(g.R), 32));
  if (s.block_m <= 0) {
    int64_t m = rc ? std::max<int64_t>(1, 4096 / s.block_r) : 64;
    s.block_m = static_cast<int>(std::min({m, Pow2Ceil(g.rows), int64_t{64}}));
  }
  while (static_cast<int64_t>(s.block_m) * s.block_r > 16384 && s.block_r > 16) s.block_r /= 2;
  if (s.warps <= 0) s.warps = static_cast<int64_t>(s.block_m) * s.block_r >= 4096 ? 8 : 4;
  const bool splittable = op.kind == "sum" || op.kind == "mean" || op.kind == "amax" || op.kind == "amin" ||
                          op.kind == "norm";
  if (!splittable) {
    s.split = 1;
  } else if (s.split <= 0) {
    int64_t programs = CeilDiv(g.rows, s.block_m);
    int64_t sp = 1;
    if (programs < 264 && g.R >= 8 * s.block_r) {
      // Few rows: each is split over programs. A sum, mean, max or min, and
      // a norm over contiguous rows, take 16 programs per SM of tiles of at
      // most 2048 (H200, the KL divergence terms summed over 16384^2: 0.64 ms
      // with 528 programs of 4096-element tiles, 0.57 ms so; a plain sum of
      // two tensors runs the same either way; layer-norm statistics of 16
      // rows of 4M: 0.090 -> 0.084 ms). Other norms keep 528 (not measured).
      const bool wide = op.kind != "norm" || rc;
      if (wide && want.block_r <= 0) s.block_r = std::min(s.block_r, 2048);
      sp = std::min(CeilDiv(wide ? 2112 : 528, programs), CeilDiv(g.R, 4 * s.block_r));
    }
    s.split = static_cast<int>(std::clamp<int64_t>(sp, 1, 4096));
  }
  s.split = static_cast<int>(std::clamp<int64_t>(s.split, 1, std::max<int64_t>(1, CeilDiv(g.R, s.block_r))));
  return s;
}

bool EpilogueFits(const RedOp& op, const RedSchedule& want) {
  const Geometry& g = op.geo;
  if (CoopEpilogue(op, want)) return true;
  if (g.rows < 256 || g.R > (int64_t{1} << 17)) return false;
  // Rows along the last dimension longer than one block: the second loop's
  // re-read misses the cache, and one kernel was measured slower than the
  // reduction plus an elementwise kernel (H200: 0.46-0.64 vs 0.65 of copy at
  // 65535 and 262144 elements per row).
  return RowsContiguous(g) || Pow2Ceil(g.R) <= 4096;
}


}  // namespace ax::builtin
