// Emission of row reductions: sum, mean, amax and amin (split over programs
// when rows are few, or with an elementwise epilogue run on the row in the
// same program), sibling reductions in one pass, argmax and argmin, and the
// cumulative sum and product.
#include <string>
#include <vector>

#include "builtin/reduce_emit.h"

namespace ax::builtin {

using namespace red;

namespace {

// The pieces that differ between a sum, mean, max and min.
struct Accumulate {
  std::string neutral;  // the accumulator's start
  std::string reduce;   // across a tile's columns (max and min keep NaN, as PyTorch's amax/amin do)
  // acc combined with v (the GPU's max/min drop NaN: kNanArg keeps it).
  std::string Combine(const std::string& acc, const std::string& v) const {
    if (reduce == "_ax_nanmax") return "tl.maximum(" + acc + ", " + v + kNanArg;
    if (reduce == "_ax_nanmin") return "tl.minimum(" + acc + ", " + v + kNanArg;
    return acc + " + " + v;
  }
  // The launcher's merge of the splits' partial results `part` ([split, rows]).
  std::string Merge(const std::string& kind, const std::string& part, int split, int64_t R) const {
    if (split == 1) return part + "[0]";
    std::string m = part + (kind == "amax" ? ".amax(0)" : kind == "amin" ? ".amin(0)" : ".sum(0)");
    return kind == "mean" ? m + " / " + PyFloat(static_cast<double>(R)) : m;
  }
};

Accumulate For(const std::string& kind) {
  if (kind == "amax") return {"float('-inf')", "_ax_nanmax"};
  if (kind == "amin") return {"float('inf')", "_ax_nanmin"};
  return {"0.0", "tl.sum"};
}

// The loop header over a row's tiles from r0 = 0 (r: the tile's columns, m:
// its mask); the caller writes the body inside the returned block.
[[nodiscard]] PyWriter::Block RowTiles(PyWriter& w, const RedKernel& rk, const std::string& from = "") {
  PyWriter::Block loop = w.Open("for r0 in range(0, " + (from.empty() ? I(rk.geo().R) : from) + ", BLOCK_R):");
  w.Line("r = (" + std::string(from.empty() ? "" : "lo + ") + "r0 + tl.arange(0, BLOCK_R)[None, :])" + rk.Cast());
  w.Line("m = rmask & (r < " + I(rk.geo().R) + ")");
  return loop;
}

std::string Schedule(const RedKernel& rk) {
  return "BLOCK_M=" + I(rk.s.block_m) + ", BLOCK_R=" + I(rk.s.block_r) + ", num_warps=" + I(rk.s.warps);
}

// Sum, mean, max or min with split partial results merged by the launcher.
void Plain(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const Accumulate a = For(op.kind);
  const std::string chunk = I(rk.Chunk());
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", out, ", op.kind);
    w.Line("lo = tl.program_id(1) * " + chunk);
    w.Line("acc = tl.full([BLOCK_M, BLOCK_R], " + a.neutral + ", tl.float32)");
    {
      auto loop = RowTiles(w, rk, chunk);
      rk.Load(w, NeutralOther(op.kind), false);
      w.Line("acc = " + a.Combine("acc", "v"));
    }
    const std::string post = op.kind == "mean" && rk.s.split == 1 ? " / " + PyFloat(static_cast<double>(g.R)) : "";
    w.Line("res = " + a.reduce + "(acc, axis=1)" + post);
    w.Line("tl.store(out + tl.program_id(1) * " + I(g.rows) + " + rows, res, mask=rvalid)");
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams);
    w.Line("part = torch.empty((" + I(rk.s.split) + ", " + I(g.rows) + "), device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ", " + I(rk.s.split) + ")](" + rk.xparams + ", part, " +
           Schedule(rk) + ")");
    w.Line("return (" + a.Merge(op.kind, "part", rk.s.split, g.R) + ").reshape(" + PyShape(op.out_shape) + ")");
  }
  EndDef(w);
}

// Sum, mean, max or min whose reader runs in the same program: the row
// reduced, then a second loop over it computing the epilogue at each element.
void WithEpilogue(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const ReductionEpilogue& epi = *rk.epi;
  const Accumulate a = For(op.kind);
  std::string eparams, outs, rets;
  for (const auto& prm : epi.params) eparams += ", " + prm;
  for (size_t i = 0; i < epi.outputs; ++i) {
    outs += ", out" + std::to_string(i);
    rets += (i ? ", out" : "out") + std::to_string(i);
  }
  {
    auto kernel = rk.RowKernel(w, rk.xparams + eparams + outs + ", ", op.kind);
    w.Line("acc = tl.full([BLOCK_M, BLOCK_R], " + a.neutral + ", tl.float32)");
    {
      auto loop = RowTiles(w, rk);
      rk.Load(w, NeutralOther(op.kind), false);
      w.Line("acc = " + a.Combine("acc", "v"));
    }
    const std::string post = op.kind == "mean" ? " / " + PyFloat(static_cast<double>(rk.geo().R)) : "";
    w.Line("red2 = (" + a.reduce + "(acc, axis=1)" + post + ")[:, None]");
    w.Text(epi.once);
    w.Line("# the elementwise kernel that reads it, over the same row");
    {
      auto loop = RowTiles(w, rk);
      w.Line("offs = base + " + rk.Off());
      w.Text(epi.lines);
    }
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams + eparams);
    w.Text(epi.head);
    for (size_t i = 0; i < epi.outputs; ++i) {
      w.Line("out" + std::to_string(i) + " = torch.empty(" + PyShape(op.in_shape) + ", device=" + rk.dev +
             ", dtype=torch.float32)");
    }
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ",)](" + rk.xparams + eparams + outs + ", " + Schedule(rk) + ")");
    w.Line("return " + rets);
  }
  EndDef(w);
}

// Per lane the first best element (strictly better replaces, so the lane
// keeps its first occurrence); across lanes the lowest index of the best
// value. NaN counts as the best (as in PyTorch), its first index wins.
void ArgReduction(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const std::string R = I(rk.geo().R);
  const bool max = op.kind == "argmax";
  const std::string neutral = max ? "float('-inf')" : "float('inf')";
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", out, ", op.kind);
    w.Line("best = tl.full([BLOCK_M, BLOCK_R], " + neutral + ", tl.float32)");
    w.Line("bidx = tl.zeros([BLOCK_M, BLOCK_R], tl.int32) + (tl.arange(0, BLOCK_R)[None, :])" + rk.Cast());
    {
      auto loop = RowTiles(w, rk);
      rk.Load(w, NeutralOther(op.kind), false);
      w.Line(std::string("take = (") + (max ? "v > best" : "v < best") + ") | ((v != v) & (best == best))");
      w.Line("best = tl.where(take, v, best)");
      w.Line("bidx = tl.where(take, r, bidx)");
    }
    w.Line("nan = best != best");
    w.Line("top = " + std::string(max ? "tl.max" : "tl.min") + "(tl.where(nan, " + neutral + ", best), axis=1)");
    w.Line("first_top = tl.min(tl.where((best == top[:, None]) & (bidx < " + R + "), bidx, " + R + "), axis=1)");
    w.Line("first_nan = tl.min(tl.where(nan & (bidx < " + R + "), bidx, " + R + "), axis=1)");
    w.Line("res = tl.where(first_nan < " + R + ", first_nan, first_top)");
    w.Line("tl.store(out + rows, res.to(tl.int64), mask=rvalid)");
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams);
    w.Line("out = torch.empty((" + I(rk.geo().rows) + ",), device=" + rk.dev + ", dtype=torch.int64)");
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ",)](" + rk.xparams + ", out, " + Schedule(rk) + ")");
    w.Line("return out.reshape(" + PyShape(op.out_shape) + ")");
  }
  EndDef(w);
}

// Inclusive scan along the row, tile by tile: the scan of a tile plus (times)
// the running total of the tiles before it, which is the last column of the
// previous tile's result (padding lanes hold the neutral element, so it is
// the whole tile's). Reversed: the tiles from the last, each scanned from its
// end; the running total is the first column of the tile after it.
void Scan(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const bool prod = op.kind == "cumprod";
  const std::string neutral = prod ? "1.0" : "0.0";
  const std::string rev = op.reverse ? ", reverse=True" : "";
  const int64_t tiles = CeilDiv(g.R, rk.s.block_r);
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", out, ", op.kind);
    w.Line("carry = tl.full([BLOCK_M], " + neutral + ", tl.float32)");
    {
      auto loop = w.Open(op.reverse ? "for i in range(0, " + I(tiles) + "):" : "for r0 in range(0, " + I(g.R) + ", BLOCK_R):");
      if (op.reverse) w.Line("r0 = (" + I(tiles - 1) + " - i) * BLOCK_R");
      w.Line("r = (r0 + tl.arange(0, BLOCK_R)[None, :])" + rk.Cast());
      w.Line("m = rmask & (r < " + I(g.R) + ")");
      w.Line("addr = base + " + rk.Off());
      rk.Load(w, neutral, true);
      w.Line(prod ? "c = tl.cumprod(v, axis=1" + rev + ") * carry[:, None]" : "c = tl.cumsum(v, axis=1" + rev + ") + carry[:, None]");
      w.Line("tl.store(out + addr, c, mask=m)");
      w.Line("carry = tl.sum(tl.where(r == " + std::string(op.reverse ? "r0" : "r0 + BLOCK_R - 1") + ", c, 0.0), axis=1)");
    }
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams);
    w.Line("out = torch.empty(" + PyShape(op.in_shape) + ", device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ",)](" + rk.xparams + ", out, " + Schedule(rk) + ")");
    w.Line("return out");
  }
  EndDef(w);
}

}  // namespace

Status red::EmitRows(const RedKernel& rk, PyWriter& w) {
  const std::string& kind = rk.op.kind;
  if (kind == "argmax" || kind == "argmin") {
    ArgReduction(rk, w);
  } else if (kind == "cumsum" || kind == "cumprod") {
    Scan(rk, w);
  } else if (rk.epi) {
    WithEpilogue(rk, w);
  } else {
    Plain(rk, w);
  }
  return Status::Ok();
}

Status EmitSiblingReductions(const std::vector<const RedOp*>& ops, size_t k, const RedSchedule& want,
                             const ReductionPrologue& pro, std::string* src) {
  if (ops.size() < 2 || pro.results.size() != ops.size()) return Status::Error("sibling reductions need two or more");
  const RedOp& lead = *ops[0];
  const Geometry& g = lead.geo;
  std::string kinds;
  for (const RedOp* op : ops) {
    if (op->kind != "sum" && op->kind != "mean" && op->kind != "amax" && op->kind != "amin") {
      return Status::Error("sibling reductions are sums, means, maxima or minima");
    }
    const Geometry& h = op->geo;
    if (op->in_shape != lead.in_shape || h.rows != g.rows || h.R != g.R || h.RD != g.RD || h.S1 != g.S1 ||
        h.S2 != g.S2 || h.IN != g.IN || h.S3 != g.S3) {
      return Status::Error("sibling reductions over different rows");
    }
    kinds += (kinds.empty() ? "" : ", ") + op->kind;
  }
  RedKernel rk(lead, want, ResolveSchedule(lead, want), &pro, nullptr);
  rk.k = I(static_cast<int64_t>(k));
  rk.big = g.numel() >= (int64_t{1} << 31) - (int64_t{1} << 20);
  rk.blocked = RowsContiguous(g) && g.RD < g.rows;
  for (size_t i = 0; i < pro.params.size(); ++i) rk.xparams += (i ? ", " : "") + pro.params[i];
  const int split = rk.s.split;
  const std::string chunk = I(rk.Chunk());
  std::string outs, parts, rets;
  for (size_t j = 0; j < ops.size(); ++j) {
    outs += "out" + I(static_cast<int64_t>(j)) + ", ";
    parts += ", part" + I(static_cast<int64_t>(j));
  }
  PyWriter w;
  {
    auto kernel = rk.RowKernel(w, rk.xparams + ", " + outs, kinds + " (sibling reductions, one pass)");
    w.Line("lo = tl.program_id(1) * " + chunk);
    for (size_t j = 0; j < ops.size(); ++j) {
      w.Line("acc" + I(static_cast<int64_t>(j)) + " = tl.full([BLOCK_M, BLOCK_R], " + For(ops[j]->kind).neutral +
             ", tl.float32)");
    }
    {
      auto loop = RowTiles(w, rk, chunk);
      w.Line("offs = base + " + rk.Off());
      w.Text(pro.lines);
      for (size_t j = 0; j < ops.size(); ++j) {
        const Accumulate a = For(ops[j]->kind);
        const std::string acc = "acc" + I(static_cast<int64_t>(j));
        w.Line(acc + " = " + a.Combine(acc, "tl.where(m, " + pro.results[j] + ", " + a.neutral + ")"));
      }
    }
    for (size_t j = 0; j < ops.size(); ++j) {
      const RedOp& op = *ops[j];
      const std::string sj = I(static_cast<int64_t>(j));
      const std::string post = op.kind == "mean" && split == 1 ? " / " + PyFloat(static_cast<double>(g.R)) : "";
      w.Line("tl.store(out" + sj + " + tl.program_id(1) * " + I(g.rows) + " + rows, " + For(op.kind).reduce + "(acc" + sj +
             ", axis=1)" + post + ", mask=rvalid)");
    }
  }
  EndDef(w);
  {
    auto launcher = w.Open("def _ax_red" + rk.k + "(" + rk.xparams + "):");
    w.Text(pro.head);
    for (size_t j = 0; j < ops.size(); ++j) {
      w.Line("part" + I(static_cast<int64_t>(j)) + " = torch.empty((" + I(split) + ", " + I(g.rows) + "), device=" +
             pro.tensor + ".device, dtype=torch.float32)");
      rets += (j ? ", (" : "(") + For(ops[j]->kind).Merge(ops[j]->kind, "part" + I(static_cast<int64_t>(j)), split, g.R) +
              ").reshape(" + PyShape(ops[j]->out_shape) + ")";
    }
    w.Line("_ax_red" + rk.k + "_kernel[(" + rk.Grid0() + ", " + I(split) + ")](" + rk.xparams + parts + ", " +
           Schedule(rk) + ")");
    w.Line("return " + rets);
  }
  EndDef(w);
  *src += w.str();
  return Status::Ok();
}

}  // namespace ax::builtin
