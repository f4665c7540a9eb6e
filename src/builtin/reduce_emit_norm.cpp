// Emission of norms (layer, group, instance and batch norm with training
// statistics): a statistics kernel (shifted sums, split over programs when
// rows are few) and a one-launch merge behind `_ax_red<k>_stats`, then the
// apply: over the flat tensor, row by row (few long rows with a weight per
// position), in one pass with the row in registers, or a split-row kernel
// (reduce_emit_coop.cpp).
#include <string>

#include "builtin/reduce_emit.h"

namespace ax::builtin {

using namespace red;

namespace {

constexpr int kApplyBlock = 1024;

// x's value at flat index offs (under mask) into v: a load, or the
// prologue's lines (which read m).
void LoadX(const RedOp& op, const ReductionPrologue* pro, PyWriter& w, const std::string& sfx) {
  if (!pro) {
    w.Line("v" + sfx + " = tl.load(x" + sfx + " + offs, mask=mask, other=0.0)");
    return;
  }
  w.Line("m = mask");
  w.Text(pro->load("0.0"));
}

// The apply at flat index offs: (x - mean[row]) / sqrt(var[row] + eps), then
// the weight and bias of the element's channel, into y<sfx>.
void Apply(const RedOp& op, const ReductionPrologue* pro, PyWriter& w, const std::string& sfx) {
  const int64_t numel = op.geo.numel();
  std::string row = "(offs // " + I(op.row_div) + ")";
  if (op.row_div * op.row_mod != numel) row = "(" + row + " % " + I(op.row_mod) + ")";
  if (op.row_div == 1 && op.row_mod == numel) row = "offs";
  const std::string ch = op.ch_div == 1 ? "offs % " + I(op.ch_mod) : "(offs // " + I(op.ch_div) + ") % " + I(op.ch_mod);
  const std::string& s = sfx;
  w.Line("row" + s + " = " + row);
  LoadX(op, pro, w, s);
  w.Line("mu" + s + " = tl.load(mean" + s + " + row" + s + ", mask=mask, other=0.0)");
  w.Line("va" + s + " = tl.load(var" + s + " + row" + s + ", mask=mask, other=1.0)");
  w.Line("y" + s + " = (v" + s + " - mu" + s + ") / tl.sqrt(va" + s + " + " + PyFloat(op.eps) + ")");
  if (op.affine) {
    w.Line("c" + s + " = " + ch);
    w.Line("y" + s + " = y" + s + " * tl.load(w" + s + " + c" + s + ", mask=mask, other=0.0)");
    auto has_b = w.Open("if HAS_B" + s + ":");
    w.Line("y" + s + " = y" + s + " + tl.load(b" + s + " + c" + s + ", mask=mask, other=0.0)");
  }
}

// The statistics kernel: sums shifted by the row's first element k0 (a
// stable variance in one read), partial per split; then the merge of the
// partials (a tile of MBS partials x MRW rows per step: one launch instead of
// about eight PyTorch operations).
void Statistics(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const std::string R = I(g.R), ROWS = I(g.rows), SPLIT = I(rk.s.split), chunk = I(rk.Chunk());
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", p1, p2, shift, ", op.kind);
    if (rk.pro) {
      // The row's first element, through tiles of the loop's shape (Triton
      // needs m, offs, v and the prologue's values to keep their types
      // across the loop below): only column 0 is read.
      w.Line("m = rmask & (tl.arange(0, BLOCK_R)[None, :] < 1)");
      w.Line("offs = base + (tl.arange(0, BLOCK_R)[None, :] * 0)" + rk.Cast());
      w.Text(rk.pro->load("0.0"));
      w.Line("k0 = tl.sum(v, axis=1)[:, None]");
    } else {
      w.Line("k0 = tl.load(x + base, mask=rmask, other=0.0)");
    }
    w.Line("lo = tl.program_id(1) * " + chunk);
    w.Line("a1 = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)");
    w.Line("a2 = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)");
    {
      auto loop = w.Open("for r0 in range(0, " + chunk + ", BLOCK_R):");
      w.Line("r = (lo + r0 + tl.arange(0, BLOCK_R)[None, :])" + rk.Cast());
      w.Line("m = rmask & (r < " + R + ")");
      rk.Load(w, "0.0", false);
      w.Line("d = tl.where(m, v - k0, 0.0)");
      w.Line("a1 += d");
      w.Line("a2 += d * d");
    }
    w.Line("rm = rvalid");
    w.Line("tl.store(p1 + tl.program_id(1) * " + ROWS + " + rows, tl.sum(a1, axis=1), mask=rm)");
    w.Line("tl.store(p2 + tl.program_id(1) * " + ROWS + " + rows, tl.sum(a2, axis=1), mask=rm)");
    auto first = w.Open("if tl.program_id(1) == 0:");
    w.Line("tl.store(shift + rows, tl.sum(k0, axis=1), mask=rm)");
  }
  EndDef(w);
  int64_t mrw = 1, mbs = 1;
  while (mrw < g.rows && mrw < 128) mrw *= 2;
  while (mbs < rk.s.split && mbs * mrw < 4096) mbs *= 2;
  const std::string MRW = I(mrw), MBS = I(mbs);
  w.Line("@triton.jit");
  {
    auto merge = w.Open("def _ax_red" + rk.k + "_merge(p1, p2, shift, mean, var):");
    w.Line("# the rows' mean and biased variance from the " + SPLIT + " column partials");
    w.Line("rows = tl.program_id(0) * " + MRW + " + tl.arange(0, " + MRW + ")");
    w.Line("rm = rows < " + ROWS);
    w.Line("a1 = tl.zeros([" + MRW + "], dtype=tl.float32)");
    w.Line("a2 = tl.zeros([" + MRW + "], dtype=tl.float32)");
    {
      auto loop = w.Open("for s0 in range(0, " + SPLIT + ", " + MBS + "):");
      w.Line("sp = s0 + tl.arange(0, " + MBS + ")[:, None]");
      w.Line("m = (sp < " + SPLIT + ") & rm[None, :]");
      w.Line("a1 += tl.sum(tl.load(p1 + sp * " + ROWS + " + rows[None, :], mask=m, other=0.0), axis=0)");
      w.Line("a2 += tl.sum(tl.load(p2 + sp * " + ROWS + " + rows[None, :], mask=m, other=0.0), axis=0)");
    }
    w.Line("md = a1 / " + R + ".0");
    w.Line("tl.store(mean + rows, tl.load(shift + rows, mask=rm, other=0.0) + md, mask=rm)");
    w.Line("tl.store(var + rows, tl.maximum(a2 / " + R + ".0 - md * md, 0.0), mask=rm)");
  }
  EndDef(w);
}

}  // namespace

std::string NormApplyLines(const RedOp& op, const std::string& sfx) {
  PyWriter w;
  Apply(op, nullptr, w, sfx);
  return w.str();
}

PyWriter::Block red::NormLauncher(const RedKernel& rk, PyWriter& w) {
  const std::string ROWS = I(rk.geo().rows), wb = rk.pro ? rk.pro->tensor : "x";
  PyWriter::Block body = rk.Launcher(w, rk.xparams + ", mod");
  w.Line("out = torch.empty(" + PyShape(rk.op.in_shape) + ", device=" + rk.dev + ", dtype=torch.float32)");
  w.Line("mean = torch.empty((" + ROWS + ",), device=" + rk.dev + ", dtype=torch.float32)");
  w.Line("var = torch.empty((" + ROWS + ",), device=" + rk.dev + ", dtype=torch.float32)");
  w.Line("w = mod.weight if getattr(mod, \"weight\", None) is not None else " + wb);
  w.Line("b = mod.bias if getattr(mod, \"bias\", None) is not None else " + wb);
  return body;
}

void red::NormRunningStats(const RedKernel& rk, PyWriter& w) {
  if (!rk.op.running_stats) return;
  const std::string R = I(rk.geo().R);
  auto training = w.Open("if mod.training and mod.track_running_stats:");
  auto no_grad = w.Open("with torch.no_grad():");
  w.Line("mod.num_batches_tracked.add_(1)");
  w.Line("f = (1.0 / float(mod.num_batches_tracked)) if mod.momentum is None else mod.momentum");
  w.Line("mod.running_mean.mul_(1.0 - f).add_(mean, alpha=f)");
  w.Line("mod.running_var.mul_(1.0 - f).add_(var, alpha=f * " + R + " / max(" + R + " - 1, 1))");
}

void red::NormAffine(const RedOp& op, PyWriter& w) {
  if (!op.affine) return;
  w.Line("c = " + (op.ch_div == 1 ? "addr % " + I(op.ch_mod) : "(addr // " + I(op.ch_div) + ") % " + I(op.ch_mod)));
  w.Line("y = y * tl.load(w + c, mask=m, other=0.0)");
  auto has_b = w.Open("if HAS_B:");
  w.Line("y = y + tl.load(b + c, mask=m, other=0.0)");
}

Status red::EmitNorm(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const RedSchedule& s = rk.s;
  const std::string R = I(g.R), ROWS = I(g.rows), SPLIT = I(s.split), eps = PyFloat(op.eps);
  const std::string wb = rk.pro ? rk.pro->tensor : "x", xlhs = rk.pro ? "_" : "x";
  const std::string sched = "BLOCK_M=" + I(s.block_m) + ", BLOCK_R=" + I(s.block_r) + ", num_warps=" + I(s.warps);
  const bool coop = rk.cs.coop > 0;
  const bool one_pass = s.split == 1 && s.block_r >= g.R;
  // Few long rows with a weight per position of the row (a layer norm over
  // large trailing dims): the apply walks the rows, not the flat tensor.
  const bool by_rows = !coop && !one_pass && op.affine && op.ch_div == 1 && op.ch_mod == g.R && op.row_div == g.R &&
                       g.rows <= 64 && g.R >= (int64_t{1} << 16);
  Statistics(rk, w);
  if (!by_rows && !coop) {
    w.Line("@triton.jit");
    {
      auto apply = w.Open("def _ax_red" + rk.k + "_apply(" + rk.xparams +
                          ", out, mean, var, w, b, HAS_B: tl.constexpr, BLOCK: tl.constexpr):");
      w.Line("# (" + op.kind + ") y = (x - mean[row]) / sqrt(var[row] + eps) * weight[c] + bias[c]");
      w.Line("offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))" + rk.Cast());
      w.Line("mask = offs < " + I(g.numel()));
      Apply(op, rk.pro, w, "");
      w.Line("tl.store(out + offs, y, mask=mask)");
    }
    EndDef(w);
  }
  int64_t mrw = 1;
  while (mrw < g.rows && mrw < 128) mrw *= 2;
  {
    auto stats = w.Open("def _ax_red" + rk.k + "_stats(" + rk.xparams + ", mod):");
    w.Line("\"\"\"x made contiguous (None with a prologue), its per-row mean and biased");
    w.Line("variance, and the affine parameters for an apply kernel (a tensor argument");
    w.Line("stands in for a missing one; has_b).\"\"\"");
    if (rk.pro) {
      w.Text(rk.pro->head);
    } else {
      rk.CheckX(w);
    }
    w.Line("p1 = torch.empty((" + SPLIT + ", " + ROWS + "), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("p2 = torch.empty((" + SPLIT + ", " + ROWS + "), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("shift = torch.empty((" + ROWS + ",), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ", " + SPLIT + ")](" + rk.xparams + ", p1, p2, shift, " + sched + ")");
    w.Line("mean = torch.empty((" + ROWS + ",), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("var = torch.empty((" + ROWS + ",), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_merge[(" + I(CeilDiv(g.rows, mrw)) + ",)](p1, p2, shift, mean, var, num_warps=4)");
    NormRunningStats(rk, w);
    w.Line("w = mod.weight if getattr(mod, \"weight\", None) is not None else " + wb);
    w.Line("b = mod.bias if getattr(mod, \"bias\", None) is not None else " + wb);
    w.Line(std::string("return ") + (rk.pro ? "None" : "x") + ", mean, var, w, b, getattr(mod, \"bias\", None) is not None");
  }
  EndDef(w);
  if (coop) return EmitCoopNorm(rk, w);
  const std::string stats_call = xlhs + ", mean, var, w, b, has_b = _ax_red" + rk.k + "_stats(" + rk.xparams + ", mod)";
  const std::string out = "out = torch.empty(" + PyShape(op.in_shape) + ", device=" + rk.dev + ", dtype=torch.float32)";
  if (one_pass) {
    // One pass: the row stays in registers between its statistics (exact
    // two-pass variance over the registers) and its apply.
    {
      auto kernel = rk.RowKernel(w, rk.xparams + ", out, mean_out, var_out, w, b, HAS_B: tl.constexpr, ", op.kind, "_kernel_one");
      w.Line("r = tl.arange(0, BLOCK_R)[None, :]" + rk.Cast());
      w.Line("m = rmask & (r < " + R + ")");
      w.Line("addr = base + " + rk.Off());
      rk.Load(w, "0.0", true);
      w.Line("v = tl.where(m, v, 0.0)");
      w.Line("mu = tl.sum(v, axis=1) / " + R + ".0");
      w.Line("d = tl.where(m, v - mu[:, None], 0.0)");
      w.Line("va = tl.sum(d * d, axis=1) / " + R + ".0");
      w.Line("y = d / tl.sqrt(va[:, None] + " + eps + ")");
      NormAffine(op, w);
      w.Line("tl.store(out + addr, y, mask=m)");
      w.Line("tl.store(mean_out + rows, mu, mask=rvalid)");
      w.Line("tl.store(var_out + rows, va, mask=rvalid)");
    }
    EndDef(w);
    {
      auto launcher = NormLauncher(rk, w);
      w.Line("_ax_red" + rk.k + "_kernel_one[(" + rk.Grid0() + ",)](" + rk.xparams +
             ", out, mean, var, w, b, HAS_B=getattr(mod, \"bias\", None) is not None, " + sched + ")");
      NormRunningStats(rk, w);
      w.Line("return out");
    }
    EndDef(w);
  } else if (by_rows) {
    // Each program takes a chunk of positions through every row, so its
    // weights come from DRAM once, not once per row; the row's mean and 1/std
    // once per row (H200, 16 rows of 4M: 0.175 -> 0.166 ms).
    w.Line("@triton.jit");
    {
      auto apply = w.Open("def _ax_red" + rk.k + "_apply_rows(" + rk.xparams +
                          ", out, mean, var, w, b, HAS_B: tl.constexpr, BLOCK: tl.constexpr):");
      w.Line("# (" + op.kind + ") y = (x - mean[row]) / sqrt(var[row] + eps) * weight[c] + bias[c], row by row");
      w.Line("f = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))" + rk.Cast());
      w.Line("mask = f < " + R);
      w.Line("wv = tl.load(w + f, mask=mask, other=0.0)");
      {
        auto has_b = w.Open("if HAS_B:");
        w.Line("bv = tl.load(b + f, mask=mask, other=0.0)");
      }
      auto rows = w.Open("for rr in range(0, " + ROWS + "):");
      w.Line("offs = rr * " + R + " + f");
      LoadX(op, rk.pro, w, "");
      w.Line("rs = 1.0 / tl.sqrt(tl.load(var + rr) + " + eps + ")");
      w.Line("y = (v - tl.load(mean + rr)) * rs * wv");
      {
        auto has_b = w.Open("if HAS_B:");
        w.Line("y = y + bv");
      }
      w.Line("tl.store(out + offs, y, mask=mask)");
    }
    EndDef(w);
    {
      auto launcher = w.Open("def _ax_red" + rk.k + "(" + rk.xparams + ", mod):");
      w.Line(stats_call);
      w.Line(out);
      w.Line("_ax_red" + rk.k + "_apply_rows[(triton.cdiv(" + R + ", " + I(kApplyBlock) + "),)](" + rk.xparams +
             ", out, mean, var, w, b, HAS_B=has_b, BLOCK=" + I(kApplyBlock) + ", num_warps=4)");
      w.Line("return out");
    }
    EndDef(w);
  } else {
    {
      auto launcher = w.Open("def _ax_red" + rk.k + "(" + rk.xparams + ", mod):");
      w.Line(stats_call);
      w.Line(out);
      w.Line("_ax_red" + rk.k + "_apply[(triton.cdiv(" + I(g.numel()) + ", " + I(kApplyBlock) + "),)](" + rk.xparams +
             ", out, mean, var, w, b, HAS_B=has_b, BLOCK=" + I(kApplyBlock) + ", num_warps=4)");
      w.Line("return out");
    }
    EndDef(w);
  }
  return Status::Ok();
}

Status EmitNormFromStatistics(const RedOp& op, size_t k, std::string* src) {
  if (op.kind != "norm") return Status::Error("statistics given to a " + op.kind);
  RedKernel rk(op, RedSchedule(), ResolveSchedule(op, RedSchedule()), nullptr, nullptr);
  rk.k = I(static_cast<int64_t>(k));
  rk.big = op.geo.numel() >= (int64_t{1} << 31) - (int64_t{1} << 20);
  rk.xparams = "x";
  rk.dev = "x.device";
  PyWriter w;
  w.Line("@triton.jit");
  {
    auto apply = w.Open("def _ax_red" + rk.k + "_apply(x, out, mean, var, w, b, HAS_B: tl.constexpr, BLOCK: tl.constexpr):");
    w.Line("# (" + op.norm_class + ", statistics computed before) y = (x - mean[row]) / sqrt(var[row] + eps) * " +
           "weight[c] + bias[c]");
    w.Line("offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))" + rk.Cast());
    w.Line("mask = offs < " + I(op.geo.numel()));
    Apply(op, nullptr, w, "");
    w.Line("tl.store(out + offs, y, mask=mask)");
  }
  EndDef(w);
  {
    auto stats = w.Open("def _ax_red" + rk.k + "_stats(x, mod, st):");
    w.Line("\"\"\"x made contiguous, the per-row mean and biased variance st computed before, and the");
    w.Line("affine parameters for an apply kernel (a tensor argument stands in for a missing one; has_b).\"\"\"");
    rk.CheckX(w);
    w.Line("mean, var = st");
    NormRunningStats(rk, w);
    w.Line("w = mod.weight if getattr(mod, \"weight\", None) is not None else x");
    w.Line("b = mod.bias if getattr(mod, \"bias\", None) is not None else x");
    w.Line("return x, mean, var, w, b, getattr(mod, \"bias\", None) is not None");
  }
  EndDef(w);
  {
    auto launcher = w.Open("def _ax_red" + rk.k + "(x, mod, st):");
    w.Line("x, mean, var, w, b, has_b = _ax_red" + rk.k + "_stats(x, mod, st)");
    w.Line("out = torch.empty(" + PyShape(op.in_shape) + ", device=x.device, dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_apply[(triton.cdiv(" + I(op.geo.numel()) + ", " + I(kApplyBlock) +
           "),)](x, out, mean, var, w, b, HAS_B=has_b, BLOCK=" + I(kApplyBlock) + ", num_warps=4)");
    w.Line("return out");
  }
  EndDef(w);
  *src += w.str();
  return Status::Ok();
}

}  // namespace ax::builtin
