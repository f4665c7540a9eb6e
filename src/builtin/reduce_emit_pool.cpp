// Emission of pooling: max and average pooling over the trailing 1-3
// dimensions of [N, C, ...] (stride, padding, dilation, ceil mode, padding
// counted or not) and adaptive pooling, BLOCK_M output positions per
// program, each a loop over its window.
#include <string>
#include <vector>

#include "builtin/reduce_emit.h"

namespace ax::builtin {

using namespace red;

Status red::EmitPool(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const size_t d = op.pool_k.size();
  int64_t in_numel = 1;
  for (auto v : op.in_shape) in_numel *= v;
  const bool wide = in_numel >= (int64_t{1} << 31) - (int64_t{1} << 20);
  const bool is_max = op.kind == "maxpool";
  std::vector<int64_t> dil = op.pool_d;
  dil.resize(d, 1);
  int64_t spatial = 1, vol = 1;
  for (size_t i = 0; i < d; ++i) spatial *= op.in_shape[i + 2];
  for (auto v : op.pool_k) vol *= v;
  w.Line("@triton.jit");
  {
    auto kernel = w.Open("def _ax_red" + rk.k + "_kernel(" + rk.xparams + ", out, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):");
    const std::string io = PyShape(op.in_shape) + " -> " + PyShape(op.out_shape);
    if (op.pool_adaptive) {
      w.Line("# adaptive " + op.kind + " (widest window " + PyShape(op.pool_k) + "): " + io);
    } else {
      w.Line("# " + op.kind + " kernel " + PyShape(op.pool_k) + " stride " + PyShape(op.pool_s) + " padding " +
             PyShape(op.pool_p) + " dilation " + PyShape(dil) + ": " + io);
    }
    w.Line("o = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))" + std::string(wide ? ".to(tl.int64)" : ""));
    w.Line("omask = o < " + I(g.rows));
    // unravel the output index: o = ((nc * O0 + o0) * O1 + o1) * O2 + o2
    w.Line("t = o");
    for (size_t i = d; i-- > 0;) {
      w.Line("q" + I(static_cast<int64_t>(i)) + " = t % " + I(op.out_shape[i + 2]));
      w.Line("t = t // " + I(op.out_shape[i + 2]));
    }
    w.Line("nc_base = t * " + I(spatial));
    w.Line(std::string("acc = tl.full([BLOCK_M], ") + (is_max ? "float('-inf')" : "0.0") + ", tl.float32)");
    if (!is_max && !op.count_include_pad) w.Line("cnt = tl.zeros([BLOCK_M], dtype=tl.float32)");
    {
      auto loop = w.Open("for kk in range(" + I(vol) + "):");
      std::string inside = "omask", offs = "nc_base";
      int64_t stride_in = spatial, kdiv = vol;
      for (size_t i = 0; i < d; ++i) {
        const std::string si = I(static_cast<int64_t>(i));
        kdiv /= op.pool_k[i];
        stride_in /= op.in_shape[i + 2];
        w.Line("w" + si + " = (kk // " + I(kdiv) + ") % " + I(op.pool_k[i]));
        offs += " + i" + si + (stride_in == 1 ? "" : " * " + I(stride_in));
        if (op.pool_adaptive) {
          // the window of output q: [q * L // O, ceil((q + 1) * L / O))
          const std::string L = I(op.in_shape[i + 2]), O = I(op.out_shape[i + 2]);
          w.Line("i" + si + " = (q" + si + " * " + L + ") // " + O + " + w" + si);
          inside += " & (i" + si + " < ((q" + si + " + 1) * " + L + " + " + I(op.out_shape[i + 2] - 1) + ") // " + O + ")";
          continue;
        }
        w.Line("i" + si + " = q" + si + " * " + I(op.pool_s[i]) + " - " + I(op.pool_p[i]) + " + w" + si +
               (dil[i] == 1 ? "" : " * " + I(dil[i])));
        inside += " & (i" + si + " >= 0) & (i" + si + " < " + I(op.in_shape[i + 2]) + ")";
      }
      w.Line("m = " + inside);
      w.Line("offs = " + offs);
      const std::string other = is_max ? "float('-inf')" : "0.0";
      if (rk.pro) {
        w.Text(rk.pro->load(other));
      } else {
        w.Line("v = tl.load(x + offs, mask=m, other=" + other + ")");
      }
      if (is_max) {
        w.Line("acc = tl.where((v > acc) | (v != v), v, acc)  # NaN propagates, as in PyTorch");
      } else {
        w.Line("acc = acc + v");
        if (!op.count_include_pad) w.Line("cnt = cnt + m.to(tl.float32)");
      }
    }
    if (!is_max && op.count_include_pad && op.pool_ceil) {
      // A window that runs past the padded input (ceil_mode) counts only its
      // part inside it, padding included, as PyTorch does.
      w.Line("den = tl.full([BLOCK_M], 1.0, tl.float32)");
      for (size_t i = 0; i < d; ++i) {
        const std::string si = I(static_cast<int64_t>(i));
        const std::string start = "(q" + si + " * " + I(op.pool_s[i]) + " - " + I(op.pool_p[i]) + ")";
        w.Line("den = den * (tl.minimum(" + start + " + " + I(op.pool_k[i]) + ", " + I(op.in_shape[i + 2] + op.pool_p[i]) +
               ") - " + start + ").to(tl.float32)");
      }
      w.Line("acc = acc / den");
    } else if (!is_max) {
      w.Line(op.count_include_pad ? "acc = acc / " + PyFloat(static_cast<double>(vol)) : "acc = acc / cnt");
    }
    w.Line("tl.store(out + o, acc, mask=omask)");
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams);
    w.Line("out = torch.empty(" + PyShape(op.out_shape) + ", device=" + rk.dev + ", dtype=torch.float32)");
    w.Line("_ax_red" + rk.k + "_kernel[(triton.cdiv(" + I(g.rows) + ", " + I(rk.s.block_m) + "),)](" + rk.xparams +
           ", out, BLOCK_M=" + I(rk.s.block_m) + ", BLOCK_R=1, num_warps=" + I(rk.s.warps) + ")");
    w.Line("return out");
  }
  EndDef(w);
  return Status::Ok();
}

}  // namespace ax::builtin
