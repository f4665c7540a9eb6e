// EmitReduction: resolves a reduction's schedule into the values its kernels
// share (RedKernel) and dispatches to the family's writer; the shared pieces
// of every row kernel (its rows, its input's load, its launcher's checks).
#include "builtin/reduce_emit.h"

#include <algorithm>

namespace ax::builtin {

using namespace red;

std::string RedKernel::Base() const {
  const Geometry& g = geo();
  if (g.RD == 1) return g.S1 == 1 ? "row2" : "row2 * " + I(g.S1);
  if (g.RD >= g.rows) return g.S2 == 1 ? "row2" : "row2 * " + I(g.S2);
  return "(row2 // " + I(g.RD) + ") * " + I(g.S1) + " + (row2 % " + I(g.RD) + ")" + (g.S2 == 1 ? "" : " * " + I(g.S2));
}

std::string RedKernel::Off() const {
  const Geometry& g = geo();
  if (g.IN == 1) return g.S3 == 1 ? "r" : "r * " + I(g.S3);
  if (g.IN >= g.R) return "r";
  return "(r // " + I(g.IN) + ") * " + I(g.S3) + " + (r % " + I(g.IN) + ")";
}

std::string RedKernel::Grid0() const {
  const Geometry& g = geo();
  return blocked ? I(CeilDiv(g.rows, g.RD) * CeilDiv(g.RD, s.block_m)) : "triton.cdiv(" + I(g.rows) + ", " + I(s.block_m) + ")";
}

PyWriter::Block RedKernel::RowKernel(PyWriter& w, const std::string& params, const std::string& kind,
                                     const std::string& suffix) const {
  const Geometry& g = geo();
  w.Line("@triton.jit");
  PyWriter::Block body = w.Open("def _ax_red" + k + suffix + "(" + params + "BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):");
  const std::string view = "# " + kind + " over a [" + I(g.rows) + " x " + I(g.R) + "] view of " + PyShape(op.in_shape);
  if (blocked) {
    // Rows that are consecutive addresses within outer blocks of RD (and
    // more than one block): each program takes BLOCK_M rows of one block, so
    // the address is affine in the lane (Triton then reads along the rows)
    // and no lane strays into the next block.
    const std::string nb = I(CeilDiv(g.RD, s.block_m));
    w.Line(view + ": blocks of " + I(g.RD) + " consecutive rows");
    w.Line("ob = (tl.program_id(0) // " + nb + ")" + Cast());
    w.Line("i = (tl.program_id(0) % " + nb + ") * BLOCK_M + tl.arange(0, BLOCK_M)");
    w.Line("rows = ob * " + I(g.RD) + " + i");
    w.Line("rvalid = i < " + I(g.RD));
    w.Line("row2 = rows[:, None]");
    w.Line("rmask = rvalid[:, None]");
    w.Line("base = ob * " + I(g.S1) + " + i[:, None]");
  } else {
    w.Line(view);
    w.Line("rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))" + Cast());
    w.Line("rvalid = rows < " + I(g.rows));
    w.Line("row2 = rows[:, None]");
    w.Line("rmask = row2 < " + I(g.rows));
    w.Line("base = " + Base());
  }
  return body;
}

void RedKernel::Load(PyWriter& w, const std::string& other, bool addr) const {
  const std::string at = addr ? "addr" : "base + " + Off();
  if (!pro) {
    w.Line("v = tl.load(x + " + at + ", mask=m, other=" + other + ")");
    return;
  }
  w.Line("offs = " + at);
  w.Text(pro->load(other));
}

void RedKernel::CheckX(PyWriter& w) const {
  w.Line("assert list(x.shape) == " + PyShape(op.in_shape) + ", \"the kernel was generated for the traced shapes\"");
  w.Line("x = x.contiguous()");
}

PyWriter::Block RedKernel::Launcher(PyWriter& w, const std::string& sig) const {
  PyWriter::Block body = w.Open("def _ax_red" + k + "(" + sig + "):");
  if (pro) {
    w.Text(pro->head);
  } else {
    CheckX(w);
  }
  return body;
}

std::string red::NeutralOther(const std::string& kind) {
  // xent: its online logsumexp counts exp(v - max) of every lane it loads
  if (kind == "amax" || kind == "argmax" || kind == "softmax" || kind == "log_softmax" || kind == "logsumexp" ||
      kind == "xent") {
    return "float('-inf')";
  }
  if (kind == "amin" || kind == "argmin") return "float('inf')";
  return kind == "cumprod" ? "1.0" : "0.0";
}

Status EmitReduction(const RedOp& op, size_t k, const RedSchedule& want, std::string* src,
                     const ReductionPrologue* pro, const ReductionEpilogue* epi) {
  const Geometry& g = op.geo;
  const std::string& kind = op.kind;
  const bool rowwise = kind == "sum" || kind == "mean" || kind == "amax" || kind == "amin";
  RedSchedule req = want;
  if (epi && RowsContiguous(g)) {
    // The epilogue reads each program's rows again: keep a program's tile
    // small (the re-read then hits L1/L2 before other programs evict it),
    // and when the reduced extent is short, the whole of it in one tile.
    // Measured on an H200 (RMS over dim 1 of [16, 64, 512*512]): BLOCK_M 64 x
    // BLOCK_R 64 runs at 0.95 of copy, the default 256 x 16 at 0.67.
    if (req.block_r <= 0) req.block_r = static_cast<int>(Pow2Ceil(g.R) <= 128 ? Pow2Ceil(g.R) : 32);
    if (req.block_m <= 0) {
      req.block_m = static_cast<int>(std::clamp<int64_t>(4096 / req.block_r, 1, std::min<int64_t>(Pow2Ceil(g.RD), 256)));
      if (Pow2Ceil(g.R) > 128) req.block_m = std::min(req.block_m, 32);
    }
  }
  if (epi && !rowwise) return Status::Error("a reduction epilogue needs a sum, mean, max or min");
  RedKernel rk(op, want, ResolveSchedule(op, req), pro, epi);
  // A split-row kernel (cs.coop > 0) replaces the softmax's kernel or the
  // norm's apply; a norm's statistics kernel (for `_stats`) keeps the schedule
  // it would have without.
  if (rk.cs.coop > 0) {
    RedSchedule off;
    off.coop = -1;
    rk.s = ResolveSchedule(op, off);
  }
  if (epi) rk.s.split = 1;  // the whole row in one program: its value is needed there
  rk.k = I(static_cast<int64_t>(k));
  rk.big = g.numel() >= (int64_t{1} << 31) - (int64_t{1} << 20);
  rk.blocked = RowsContiguous(g) && g.RD < g.rows && kind != "maxpool" && kind != "avgpool";
  rk.xparams = "x";
  if (pro) {
    rk.xparams.clear();
    for (size_t i = 0; i < pro->params.size(); ++i) rk.xparams += (i ? ", " : "") + pro->params[i];
  }
  rk.dev = (pro ? pro->tensor : "x") + ".device";

  PyWriter w;
  Status st;
  const bool softmax = kind == "softmax" || kind == "log_softmax";
  if (rowwise && epi && CoopEpilogue(op, want) && !epi->coop_lines.empty()) {
    st = EmitCoopEpilogue(rk, w);
  } else if (rowwise || kind == "argmax" || kind == "argmin" || kind == "cumsum" || kind == "cumprod") {
    st = EmitRows(rk, w);
  } else if (softmax && rk.cs.coop > 0) {
    st = EmitCoopSoftmax(rk, w);
  } else if (softmax || kind == "logsumexp" || kind == "xent") {
    st = EmitSoftmax(rk, w);
  } else if (kind == "maxpool" || kind == "avgpool") {
    st = EmitPool(rk, w);
  } else if (kind == "norm") {
    st = EmitNorm(rk, w);
  } else {
    return Status::Error("no template for reduction " + kind);
  }
  if (!st.ok()) return st;
  *src += w.str();
  return Status::Ok();
}

const char* NanMinMaxHelpers() {
  return R"(@triton.jit
def _ax_nanmax2(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _ax_nanmin2(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _ax_nanmax(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _ax_nanmax2)


@triton.jit
def _ax_nanmin(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _ax_nanmin2)


)";
}

}  // namespace ax::builtin
