// Emission of the softmax family: softmax, log_softmax and logsumexp over
// rows (the row in one tile, or an online pass over tiles), and cross entropy
// with class indices (each row's logsumexp minus its target's value, summed
// per program, then merged by one program).
#include <algorithm>
#include <string>

#include "builtin/reduce_emit.h"

namespace ax::builtin {

using namespace red;

namespace {

std::string Schedule(const RedKernel& rk) {
  return "BLOCK_M=" + I(rk.s.block_m) + ", BLOCK_R=" + I(rk.s.block_r) + ", num_warps=" + I(rk.s.warps);
}

// A row's maximum mx and sum of exp(v - mx) tot ([BLOCK_M] each), with the
// whole row in one tile (which then stays in v, with e and safe).
void RowInOneTile(const RedKernel& rk, PyWriter& w) {
  w.Line("r = tl.arange(0, BLOCK_R)[None, :]" + rk.Cast());
  w.Line("m = rmask & (r < " + I(rk.geo().R) + ")");
  w.Line("addr = base + " + rk.Off());
  rk.Load(w, "float('-inf')", true);
  w.Line("mx = tl.max(v, axis=1)");
  w.Line("safe = tl.where(mx == float('-inf'), 0.0, mx)[:, None]");
  w.Line("e = tl.exp(v - safe)");
  w.Line("tot = tl.sum(e, axis=1)");
}

// The same by an online pass over the row's tiles (a running maximum and
// rescaled sum per lane).
void RowOnline(const RedKernel& rk, PyWriter& w) {
  const std::string R = I(rk.geo().R);
  w.Line("m_i = tl.full([BLOCK_M, BLOCK_R], float('-inf'), tl.float32)");
  w.Line("s_i = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)");
  {
    auto loop = w.Open("for r0 in range(0, " + R + ", BLOCK_R):");
    w.Line("r = (r0 + tl.arange(0, BLOCK_R)[None, :])" + rk.Cast());
    w.Line("m = rmask & (r < " + R + ")");
    rk.Load(w, NeutralOther(rk.op.kind), false);
    w.Line("m_new = tl.maximum(m_i, v)");
    w.Line("s_i = tl.where(m_new == float('-inf'), 0.0, s_i * tl.exp(m_i - m_new) + tl.exp(v - m_new))");
    w.Line("m_i = m_new");
  }
  w.Line("mx = tl.max(m_i, axis=1)");
  w.Line("tot = tl.sum(tl.where(m_i == float('-inf'), 0.0, s_i * tl.exp(m_i - mx[:, None])), axis=1)");
}

// The launcher of a kernel writing `out` of `shape`.
void OutLauncher(const RedKernel& rk, PyWriter& w, const std::vector<int64_t>& shape) {
  {
    auto launcher = rk.Launcher(w, rk.xparams);
    w.Line("out = torch.empty(" + PyShape(shape) + ", device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ",)](" + rk.xparams + ", out, " + Schedule(rk) + ")");
    w.Line("return out");
  }
  EndDef(w);
}

// One pass when the row fits a tile (H200, logsumexp over [32768, 4096]:
// 0.20 ms online in two tiles, 0.14 ms in one); else online, then (softmax,
// log_softmax) a second pass writing the result. A row of -inf gives -inf
// (logsumexp) or NaN (softmax, log_softmax), as in PyTorch.
void Softmax(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const bool one_tile = rk.s.block_r >= rk.geo().R;
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", out, ", op.kind);
    one_tile ? RowInOneTile(rk, w) : RowOnline(rk, w);
    if (op.kind == "logsumexp") {
      w.Line("tl.store(out + rows, mx + tl.log(tot), mask=rvalid)");
    } else if (one_tile) {
      w.Line(std::string("tl.store(out + addr, ") +
             (op.kind == "softmax" ? "e / tot[:, None]" : "v - (safe + tl.log(tot)[:, None])") + ", mask=m)");
    } else {
      if (op.kind == "softmax") {
        w.Line("mx2 = mx[:, None]");
        w.Line("inv = 1.0 / tot[:, None]");
      } else {
        w.Line("lt = mx[:, None] + tl.log(tot)[:, None]");
      }
      auto loop = w.Open("for r0 in range(0, " + I(rk.geo().R) + ", BLOCK_R):");
      w.Line("r = (r0 + tl.arange(0, BLOCK_R)[None, :])" + rk.Cast());
      w.Line("m = rmask & (r < " + I(rk.geo().R) + ")");
      w.Line("addr = base + " + rk.Off());
      rk.Load(w, "0.0", true);
      w.Line(std::string("tl.store(out + addr, ") + (op.kind == "softmax" ? "tl.exp(v - mx2) * inv" : "v - lt") + ", mask=m)");
    }
  }
  EndDef(w);
  OutLauncher(rk, w, op.kind == "logsumexp" ? op.out_shape : op.in_shape);
}

// Per program BLOCK_M rows: each row's logsumexp minus x at the row's target
// (gathered; a prologue is computed at that element), zero where the target
// is ignored; the program's loss sum and kept-row count go to part, and a
// one-program kernel adds them up in order (then divides, for the mean). A
// target outside [0, C) gives NaN where PyTorch raises.
void CrossEntropy(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const std::string R = I(g.R), ign = I(op.ignore_index);
  const int64_t np = CeilDiv(g.rows, rk.s.block_m);
  const std::string NP = I(np), MB = I(std::min<int64_t>(Pow2Ceil(np), 4096));
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", tgt, part, ", op.kind);
    rk.s.block_r >= g.R ? RowInOneTile(rk, w) : RowOnline(rk, w);
    w.Line("lse = mx + tl.log(tot)");
    w.Line("tg = tl.load(tgt + rows, mask=rvalid, other=" + ign + ")");
    w.Line("valid = rvalid & (tg != " + ign + ")");
    w.Line("inb = (tg >= 0) & (tg < " + R + ")");
    w.Line("m = valid & inb");
    w.Line("offs = rows * " + R + " + tl.where(m, tg, 0)");
    if (rk.pro) {
      w.Text(rk.pro->load("0.0"));
    } else {
      w.Line("v = tl.load(x + offs, mask=m, other=0.0)");
    }
    w.Line("loss = tl.where(valid, tl.where(inb, lse - v, float('nan')), 0.0)");
    w.Line("tl.store(part + tl.program_id(0), tl.sum(loss, axis=0))");
    w.Line("tl.store(part + " + NP + " + tl.program_id(0), tl.sum(valid.to(tl.float32), axis=0))");
  }
  EndDef(w);
  w.Line("@triton.jit");
  {
    auto merge = w.Open("def _ax_red" + rk.k + "_merge(part, out, NP: tl.constexpr, MB: tl.constexpr):");
    w.Line("acc_s = tl.zeros([MB], tl.float32)");
    w.Line("acc_c = tl.zeros([MB], tl.float32)");
    {
      auto loop = w.Open("for i0 in range(0, NP, MB):");
      w.Line("i = i0 + tl.arange(0, MB)");
      w.Line("acc_s += tl.load(part + i, mask=i < NP, other=0.0)");
      w.Line("acc_c += tl.load(part + NP + i, mask=i < NP, other=0.0)");
    }
    w.Line("tot_s = tl.sum(acc_s, axis=0)");
    w.Line("tot_c = tl.sum(acc_c, axis=0)");
    w.Line(std::string("tl.store(out, ") + (op.mean ? "tot_s / tot_c" : "tot_s") + ")");
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams + ", tgt");
    w.Line("assert list(tgt.shape) == [" + I(g.rows) + "], \"the kernel was generated for the traced shapes\"");
    w.Line("tgt = tgt.contiguous()");
    w.Line("part = torch.empty((2 * " + NP + ",), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("out = torch.empty([], device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ",)](" + rk.xparams + ", tgt, part, " + Schedule(rk) + ")");
    w.Line("_ax_red" + rk.k + "_merge[(1,)](part, out, NP=" + NP + ", MB=" + MB + ", num_warps=4)");
    w.Line("return out");
  }
  EndDef(w);
}

}  // namespace

Status red::EmitSoftmax(const RedKernel& rk, PyWriter& w) {
  if (rk.op.kind == "xent") {
    CrossEntropy(rk, w);
  } else {
    Softmax(rk, w);
  }
  return Status::Ok();
}

}  // namespace ax::builtin
