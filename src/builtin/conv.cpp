#include "builtin/conv.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "builtin/conv_index.h"
#include "builtin/conv_stats.h"
#include "builtin/ewgen.h"
#include "builtin/gemm_reduce.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

using namespace conv_index;  // NOLINT: the kernel's index arithmetic

namespace {

// The main loop over k = (input channel, tap) flattened: a tile of k mixes
// channels and taps, so a small number of input channels still fills BK.
// The input is read in its own (channels-first) layout; the weight packed as
// [groups, k, output channels of the group], so that a [BK, BN] tile's rows
// are contiguous (read in place, a forward weight strides BN by K). Phased
// (Phasing), k runs over the phase's taps only (ntaps of them).
void EmitFlatLoop(const ConvGeometry& c, int64_t ng, const Phasing& ph, PyWriter* w) {
  const int D = c.dims;
  const int64_t IS = Product(c.in), KS = Product(c.kernel), cin_g = c.cin / c.groups;
  w->Line("x_row = a + nb.to(tl.int64) * " + S(c.cin * IS) + " + grp * " + S(cin_g * IS));
  w->Line("w_col = b + grp * " + S(cin_g * KS * ng) + " + rn % NG");
  const std::string kg = ph.Any() ? "kgp" : "KG";
  if (ph.Any()) w->Line("kgp = " + S(cin_g) + " * ntaps");
  // No tap leaves the input: the offset is a row part (hoisted) plus a tap
  // part, and only the columns past K are masked (rows past M wrapped around
  // to valid ones).
  const bool inside = AllInBounds(c, ph);
  if (inside) {
    w->Line("# every tap inside the input: offsets split into rows and columns, no bounds masks");
    w->Line("x_row = x_row + " + SplitOffset(c, "row"));
  }
  {
    auto loop = w->Open(ph.Any() ? "for kk in range(0, KT):" : "for kk in range(0, tl.cdiv(KG, BK)):");
    w->Line("kidx = kk * BK + rk");
    // Columns past K stay as they are (every load that they reach is
    // masked by kval): clamping them with tl.where(kval, kidx, 0) made
    // Triton 3.6 mis-pipeline the loop at num_stages >= 3 on sm_90 (a
    // Conv2d 3->96, 11x11, stride 4: almost every output off by up to 0.6).
    w->Line("kval = kidx < " + kg);
    if (ph.Any()) {
      w->Line("ci = kidx // ntaps");
      w->Line("jt = kidx % ntaps");
      EmitPhasedTaps(c, ph, "jt", w);
    } else {
      w->Line("ci = kidx // " + S(KS));
      w->Line("r = kidx % " + S(KS));
      EmitTapSplit(c, "r", w);
    }
    if (inside) {
      w->Line("a_col = ci * " + S(IS) + " + " + SplitOffset(c, "tap"));
      w->Line("at = tl.load(x_row[:, None] + a_col[None, :], mask=kval[None, :], other=0.0)");
    } else {
      w->Line("valid = (rm < M)[:, None] & kval[None, :]");
    }
    for (int d = 0; d < D && !inside; ++d) {
      const std::string sd = S(d);
      if (ph.on[d]) {
        w->Line("p" + sd + " = y" + sd + "[:, None] + (" + PhasedInputOffset(ph, d, "j" + sd) + ")[None, :]");
        w->Line("valid = valid & (p" + sd + " >= 0) & (p" + sd + " < " + S(c.in[d]) + ")");
      } else if (c.transposed) {  // stride 1: input i reaches output o through tap k when o = i - pad + k*dil
        w->Line("u" + sd + " = o" + sd + "[:, None] + " + S(c.padding[d]) + " - (k" + sd + " * " + S(c.dilation[d]) +
               ")[None, :]");
        w->Line("valid = valid & (u" + sd + " >= 0) & (u" + sd + " < " + S(c.in[d]) + ")");
        w->Line("p" + sd + " = u" + sd);
      } else {
        w->Line("p" + sd + " = (o" + sd + " * " + S(c.stride[d]) + " - " + S(c.padding[d]) + ")[:, None] + (k" + sd +
               " * " + S(c.dilation[d]) + ")[None, :]");
        w->Line("valid = valid & (p" + sd + " >= 0) & (p" + sd + " < " + S(c.in[d]) + ")");
      }
    }
    if (!inside) {
      std::string pos = "p0";
      for (int d = 1; d < D; ++d) pos = "(" + pos + ") * " + S(c.in[d]) + " + p" + S(d);
      w->Line("a_off = tl.where(valid, ci[None, :] * " + S(IS) + " + " + pos + ", 0)");
      w->Line("at = tl.load(x_row[:, None] + a_off, mask=valid, other=0.0)");
    }
    // the packed weight's row: k itself, or a phase's tap of the whole kernel
    const std::string krow = ph.Any() ? "(ci * " + S(KS) + " + wtap)" : "kidx";
    w->Line("bt = tl.load(w_col[None, :] + (" + krow + " * NG)[:, None], mask=kval[:, None], other=0.0)");
    w->Line("acc = tl.dot(at, bt, acc, input_precision=\"tf32x3\")");
  }
}

// The main loop tap by tap, BK input channels at a time (one loop of
// taps x channel blocks, so that it pipelines): the rows' input positions are
// computed once per tap; the weight is packed as [groups, taps, input
// channels, output channels]. The input is read channels-last (the launcher
// permutes it), so that a row's BK channels are contiguous, or, when native,
// as it is: a channel's rows are then contiguous along the output positions
// (at stride 1), and no copy is made. Phased (Phasing), the loop visits the
// phase's taps only (ntaps of them).
void EmitTapMajorLoop(const ConvGeometry& c, int64_t ng, int bk, bool native, const Phasing& ph, PyWriter* w) {
  const int D = c.dims;
  const int64_t IS = Product(c.in), KS = Product(c.kernel), cin_g = c.cin / c.groups;
  const int64_t cb = (cin_g + bk - 1) / bk;
  const bool ragged = cin_g % bk != 0;
  w->Line("x_img = a + nb.to(tl.int64) * " + S(IS * c.cin) + " + grp * " + S(native ? cin_g * IS : cin_g));
  w->Line("w_grp = b + grp * " + S(KS * cin_g * ng));
  w->Line("nmask = (rn < NG)[None, :]");
  const std::string kmask = ragged ? " & (cols < " + S(cin_g) + ")[None, :]" : "";
  const std::string kmask_b = ragged ? " & (cols < " + S(cin_g) + ")[:, None]" : "";
  const std::string col = native ? "cols[None, :] * " + S(IS) : "cols[None, :]";
  const std::string pitch = native ? "" : " * " + S(c.cin);  // an input position's stride
  // No tap leaves the input: a row's position is hoisted, a tap adds one
  // scalar offset, and only ragged channel blocks are masked.
  const bool inside = AllInBounds(c, ph);
  if (inside) {
    w->Line("# every tap inside the input: a tap is a scalar offset, no bounds masks");
    w->Line("x_pos = x_img + (" + SplitOffset(c, "row") + ")" + pitch);
  }
  auto loop = w->Open("for kk in range(0, " + (ph.Any() ? std::string("KT") : S(KS * cb)) + "):");
  w->Line("tap = kk // " + S(cb));
  w->Line("cols = (kk % " + S(cb) + ") * BK + rk");
  if (ph.Any()) {
    EmitPhasedTaps(c, ph, "tap", w);
  } else {
    EmitTapSplit(c, "tap", w);
  }
  if (inside) {
    w->Line("toff = (" + SplitOffset(c, "tap") + ")" + pitch);
    w->Line("at = tl.load(x_pos[:, None] + toff + " + col +
            (ragged ? ", mask=(cols < " + S(cin_g) + ")[None, :], other=0.0)" : ")"));
  } else {
    w->Line("rv = rm < M");
  }
  for (int d = 0; d < D && !inside; ++d) {
    const std::string sd = S(d);
    if (ph.on[d]) {
      w->Line("p" + sd + " = y" + sd + " + " + PhasedInputOffset(ph, d, "j" + sd));
      w->Line("rv = rv & (p" + sd + " >= 0) & (p" + sd + " < " + S(c.in[d]) + ")");
    } else if (c.transposed) {  // stride 1
      w->Line("u" + sd + " = o" + sd + " + " + S(c.padding[d]) + " - k" + sd + " * " + S(c.dilation[d]));
      w->Line("rv = rv & (u" + sd + " >= 0) & (u" + sd + " < " + S(c.in[d]) + ")");
      w->Line("p" + sd + " = u" + sd);
    } else {
      w->Line("p" + sd + " = o" + sd + " * " + S(c.stride[d]) + " - " + S(c.padding[d]) + " + k" + sd + " * " +
              S(c.dilation[d]));
      w->Line("rv = rv & (p" + sd + " >= 0) & (p" + sd + " < " + S(c.in[d]) + ")");
    }
  }
  if (!inside) {
    std::string pos = "p0";
    for (int d = 1; d < D; ++d) pos = "(" + pos + ") * " + S(c.in[d]) + " + p" + S(d);
    w->Line(native ? "row = tl.where(rv, " + pos + ", 0)" : "row = tl.where(rv, (" + pos + ")" + pitch + ", 0)");
    w->Line("at = tl.load(x_img[:, None] + row[:, None] + " + col + ", mask=rv[:, None]" + kmask + ", other=0.0)");
  }
  w->Line("bt = tl.load(w_grp + (" + std::string(ph.Any() ? "wtap" : "tap") + " * " + S(cin_g) +
          " + cols)[:, None] * NG + rn[None, :], mask=nmask" + kmask_b + ", other=0.0)");
  w->Line("acc = tl.dot(at, bt, acc, input_precision=\"tf32x3\")");
}

// The main loop of a direct convolution (ConvDirect): the group's one input
// channel, tap by tap (unrolled up to 64 taps); a tap's input is one value
// per row, shared by the group's BN output channels, times their weights,
// accumulated with fp32 FMAs.
void EmitDirectLoop(const ConvGeometry& c, PyWriter* w) {
  const int D = c.dims;
  const int64_t IS = Product(c.in), KS = Product(c.kernel);
  const Phasing none = PhasesOf(c);  // a forward convolution: no dimension phased
  w->Line("x_row = a + nb.to(tl.int64) * " + S(c.cin * IS) + " + grp * " + S(IS));
  w->Line("w_col = b + co * " + S(KS));
  const bool inside = AllInBounds(c, none);
  if (inside) {
    w->Line("# every tap inside the input: offsets split into rows and taps, no bounds masks");
    w->Line("x_row = x_row + " + SplitOffset(c, "row"));
  }
  auto loop = w->Open(KS <= 64 ? "for t in tl.static_range(" + S(KS) + "):" : "for t in range(0, " + S(KS) + "):");
  EmitTapSplit(c, "t", w);
  if (inside) {
    w->Line("at = tl.load(x_row + " + SplitOffset(c, "tap") + ")");
  } else {
    w->Line("valid = rm < M");
    std::string pos;
    for (int d = 0; d < D; ++d) {
      const std::string sd = S(d);
      w->Line("p" + sd + " = o" + sd + " * " + S(c.stride[d]) + " - " + S(c.padding[d]) + " + k" + sd + " * " +
              S(c.dilation[d]));
      w->Line("valid = valid & (p" + sd + " >= 0) & (p" + sd + " < " + S(c.in[d]) + ")");
      pos = d == 0 ? "p0" : "(" + pos + ") * " + S(c.in[d]) + " + p" + sd;
    }
    w->Line("at = tl.load(x_row + tl.where(valid, " + pos + ", 0), mask=valid, other=0.0)");
  }
  w->Line("acc += at[:, None] * tl.load(w_col + t)[None, :]");
}

}  // namespace

int64_t ConvPhases(const GemmOp& op) { return PhasesOf(op.conv).count; }
int64_t ConvRowsPerImage(const GemmOp& op) { return Product(PhasesOf(op.conv).rows); }

Status EmitConv(const Graph& g, const Node& conv, const GemmOp& op, size_t k, const GemmSchedule& s,
                const Group* epi, std::string* src, const ColumnTail* column, const ConvStatsTail* stats,
                const StoreRemaps* remaps) {
  if (!ConvScheduleValid(op, s)) return Status::Error("a convolution schedule out of range");
  if ((column || stats) && remaps && !remaps->empty()) {
    return Status::Error("a convolution's reduction or statistics stored into a concatenation");
  }
  if (stats && ConvDirect(op)) return Status::Error("norm statistics in a direct convolution's kernel");
  if (stats && (column || !StatsRowsOf(*stats->norm, op, nullptr) || s.bm > ConvRowsPerImage(op))) {
    return Status::Error("norm statistics that the convolution's tiles do not hold");
  }
  // a pooling of the output in the kernel: its rows go window by window
  const RedOp* pool = column && PoolsWindows(*column->op, op) ? column->op : nullptr;
  if (pool && (stats || s.bm < PoolWindowSize(*pool))) {
    return Status::Error("a pooling whose windows the convolution's tiles do not hold");
  }
  if (column && !pool && (!ReducesColumns(*column->op, op) || s.bn < op.N)) {
    return Status::Error("a channel reduction that one tile of the convolution does not hold");
  }
  const ConvGeometry& c = op.conv;
  size_t self = 0;
  if (epi) {
    auto pos = std::find(epi->inputs.begin(), epi->inputs.end(), conv.name);
    if (pos == epi->inputs.end() || epi->shape != op.out_shape) return Status::Error("an epilogue that does not read C");
    self = static_cast<size_t>(pos - epi->inputs.begin());
  }
  const int D = c.dims;
  const int64_t OS = Product(c.out), KS = Product(c.kernel);
  const int64_t cin_g = c.cin / c.groups, ng = op.N;
  const Phasing ph = PhasesOf(c);
  // M: rows per group and phase (pooled: the positions of whole windows)
  const int64_t rows = pool ? c.batch * PooledPositions(*pool) * PoolWindowSize(*pool) : c.batch * Product(ph.rows);
  const bool wide = Product(op.out_shape) >= kInt32Elements || Product(op.in_shape) >= kInt32Elements;
  std::vector<std::string> params = {"a", "b", "bias"};
  const std::vector<std::string> outputs = KernelOutputs(epi, column);
  AppendKernelInputs(epi, self, column, &params);
  params.insert(params.end(), outputs.begin(), outputs.end());
  if (stats) params.insert(params.end(), {"pc", "pm", "pq"});
  const std::vector<int64_t> out_shape = column ? ColumnOutShape(*column) : op.out_shape;

  const std::string kname = "_ax_gemm_kernel" + std::to_string(k);
  const std::string cls = std::string(c.transposed ? "ConvTranspose" : "Conv") + std::to_string(D) + "d";
  // Phased: each launch's residues, first taps and input offsets (runtime
  // arguments, never specialised) and its tap counts and trip count.
  // With norm statistics, the phase's number (PHI) comes first.
  std::string phase_args, phase_consts, unspecialised;
  if (stats && ph.Any()) {
    phase_args = "PHI, ";
    unspecialised = "\"PHI\"";
  }
  for (int d = 0; d < D; ++d) {
    if (!ph.on[d]) continue;
    for (const char* v : {"e", "kf", "bs"}) {
      phase_args += v + S(d) + ", ";
      unspecialised += std::string(unspecialised.empty() ? "" : ", ") + "\"" + v + S(d) + "\"";
    }
    phase_consts += "NT" + S(d) + ", ";
  }
  PyWriter w;
  w.Line(ph.Any() ? "@triton.jit(do_not_specialize=[" + unspecialised + "])" : "@triton.jit");
  std::string sig = "def " + kname + "(";
  for (const auto& p : params) sig += p + ", ";
  if (ph.Any()) {
    sig += phase_args;
    for (int d = 0; d < D; ++d) {
      if (ph.on[d]) sig += "NT" + S(d) + ": tl.constexpr, ";
    }
    sig += "KT: tl.constexpr, ";
  }
  sig += "M: tl.constexpr, NG: tl.constexpr, KG: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, "
         "BK: tl.constexpr, GROUP_M: tl.constexpr):";
  {
    auto body = w.Open(sig);
    std::string what =
        ConvDirect(op)
            ? "# " + cls + " with one input channel per group (program axis 1), directly: C[m, n] = sum_t " +
                  "x[m, t] w[n, t], m = (batch, output position), n = output channel of the group, t = kernel " +
                  "tap; x gathered from the group's input channel (taps outside it masked to zero); fp32 FMAs"
            : "# " + cls + " as an implicit GEMM per group (program axis 1): C[m, n] = sum_k A[m, k] B[k, n], " +
                  "m = (batch, output position), n = output channel of the group, k = (input channel of the " +
                  "group, kernel tap); A gathered from the input (taps outside it masked to zero), B the " +
                  "weight; split-TF32 (3-pass) products, fp32 accumulation";
    if (ph.Any()) {
      what += "; the rows of one output phase (a launch per phase), visiting only the taps that reach it";
    }
    if (epi) {
      what += "; epilogue:";
      for (size_t j = 0; j < epi->nodes.size(); ++j) what += (j ? ", " : " ") + epi->ops.at(epi->nodes[j]).fn;
    }
    if (column) {
      what += "; then " + ColumnTailDescription(*column, pool ? "windows of the output positions (rows in window order)"
                                                              : "the output channels");
    }
    // a mean over the positions needs the partial sums alone: the output is not stored
    const bool mean_only = stats && IsSpatialMean(*stats->norm, op);
    if (stats) {
      what += mean_only ? "; then the partial means over the positions (the output itself is not stored)"
                        : "; then the " + stats->norm->norm_class + "'s partial statistics";
    }
    w.Line(what);
    w.Line("pid = tl.program_id(0)");
    w.Line("grp = tl.program_id(1)");
    w.Line("num_m = tl.cdiv(M, BM)");
    w.Line("num_n = tl.cdiv(NG, BN)");
    w.Line("width = GROUP_M * num_n");
    w.Line("first_m = (pid // width) * GROUP_M");
    w.Line("size_m = tl.minimum(num_m - first_m, GROUP_M)");
    w.Line("pid_m = first_m + (pid % width) % size_m");
    w.Line("pid_n = (pid % width) // size_m");
    w.Line("rm = pid_m * BM + tl.arange(0, BM)");
    w.Line("rn = pid_n * BN + tl.arange(0, BN)");
    w.Line("rk = tl.arange(0, BK)");
    w.Line("# rows and channels past the edge wrap around (valid addresses); their results are not stored");
    if (pool) {
      EmitWindowRows(c, *pool, &w);
    } else {
      EmitRows(c, ph, &w);
    }
    w.Line("co = grp * NG + rn % NG");
    w.Line("acc = tl.zeros((BM, BN), dtype=tl.float32)");
    if (ConvDirect(op)) {
      EmitDirectLoop(c, &w);
    } else if (ConvTapMajor(op)) {
      EmitTapMajorLoop(c, ng, s.bk, op.conv_native, ph, &w);
    } else {
      EmitFlatLoop(c, ng, ph, &w);
    }
    if (op.has_bias) w.Line("acc += tl.load(bias + co)[None, :]");
    w.Line(std::string("mask = (rm[:, None] < M) & (rn[None, :] < NG)") + (ph.Any() ? " & orow[:, None]" : ""));
    w.Line(std::string("offs = (nb") + (wide ? ".to(tl.int64)" : "") + "[:, None] * " + S(c.cout) +
           " + co[None, :]) * " + S(OS) + " + sp[:, None]");
    ColumnStore cs;
    if (pool) {
      // one value per (batch, channel, pooled position)
      const int64_t W = PoolWindowSize(*pool), Q = PooledPositions(*pool), MP = c.batch * Q;
      w.Line("pr = pid_m * (BM // " + S(W) + ") + tl.arange(0, BM // " + S(W) + ")  # pooled rows (batch, position)");
      cs = {*column,
            "(((pr % " + S(MP) + ") // " + S(Q) + (wide ? ").to(tl.int64)" : ")") + "[:, None] * " + S(c.cout) +
                " + co[None, :]) * " + S(Q) + " + (pr % " + S(Q) + ")[:, None]",
            "(pr < " + S(MP) + ")[:, None] & (rn < NG)[None, :]", "", "windows"};
      cs.window = W;
    } else if (column) {
      // one value per (batch, output position)
      cs = {*column, std::string("nb") + (wide ? ".to(tl.int64)" : "") + " * " + S(OS) + " + sp",
            std::string("(rm < M)") + (ph.Any() ? " & orow" : ""), "(rn < NG)[None, :]", "output channels"};
    }
    std::string value;
    Status st = EmitAccumulatorStore(g, epi, self, &w, column ? &cs : nullptr, &value, !mean_only, remaps);
    if (!st.ok()) return st;
    if (stats) EmitTileStatistics(op, ph.Any(), value, &w);
  }
  if (stats) EmitStatsMerge(op, s, *stats, k, src);

  PyWriter l;
  std::string head = "def _ax_gemm" + S(static_cast<int64_t>(k)) + "(x, weight, bias";
  if (epi) {
    for (size_t i = 0; i < epi->inputs.size(); ++i) {
      if (i != self) head += ", in" + std::to_string(i);
    }
  }
  head += ColumnPostSignature(column) + DstParams(remaps);
  {
    auto body = l.Open(head + "):");
    l.Line("assert list(x.shape) == " + PyShape(op.in_shape) + ", \"the kernel was generated for the traced shapes\"");
    std::vector<int64_t> wshape{c.transposed ? c.cin : c.cout, c.transposed ? ng : cin_g};
    for (int64_t tap : c.kernel) wshape.push_back(tap);
    l.Line("assert list(weight.shape) == " + PyShape(wshape));
    if (ConvTapMajor(op)) {
      std::string perm = "0";
      for (int d = 0; d < c.dims; ++d) perm += ", " + S(d + 2);
      l.Line(op.conv_native ? "a = x.contiguous()" : "a = x.permute(" + perm + ", 1).contiguous()  # channels-last");
      l.Line("# the weight as [groups, taps, input channels, output channels], packed once per weight version");
      l.Line(std::string("b = _ax_packed_weight(weight, lambda w: w.reshape(") + S(c.groups) + ", " +
             S(c.transposed ? cin_g : ng) + ", " + S(c.transposed ? ng : cin_g) + ", " + S(KS) + ").permute(" +
             (c.transposed ? "0, 3, 1, 2" : "0, 3, 2, 1") + ").contiguous())");
    } else {
      l.Line("a = x.contiguous()");
      if (ConvDirect(op)) {
        l.Line("b = weight.contiguous()");
      } else {
        l.Line("# the weight as [groups, input channels x taps, output channels], packed once per weight version");
        l.Line(std::string("b = _ax_packed_weight(weight, lambda w: w.reshape(") + S(c.groups) + ", " +
               (c.transposed ? S(cin_g) + ", " + S(ng) + ", " + S(KS) + ").permute(0, 1, 3, 2)"
                             : S(ng) + ", " + S(cin_g * KS) + ").permute(0, 2, 1)") +
               ".contiguous())");
      }
    }
    if (epi) {
      for (size_t i = 0; i < epi->inputs.size(); ++i) {
        if (i != self) InputPrelude(&l, *g.Find(epi->inputs[i]), i);
      }
    }
    ColumnPostPrelude(g, column, &l);
    for (size_t i = 0; i < outputs.size(); ++i) {
      OutputPrelude(&l, outputs[i], i, out_shape, "x.device", "torch.float32", remaps);
    }
    if (stats) EmitStatsAlloc(op, s, &l);
    l.Line("grid = (triton.cdiv(" + S(rows) + ", " + S(s.bm) + ") * triton.cdiv(" + S(ng) + ", " + S(s.bn) + "), " +
           S(c.groups) + ")");
    std::string call = kname + "[grid](a, b, " + (op.has_bias ? "bias" : "b");
    for (size_t i = 3; i < params.size(); ++i) call += ", " + params[i];
    std::optional<PyWriter::Block> phases;
    if (ph.Any()) {
      std::string table;
      const int64_t cb = (cin_g + s.bk - 1) / s.bk;
      for (int64_t p = 0; p < ph.count; ++p) {
        const std::vector<PhaseDim> dims = PhaseOf(c, ph, p);
        std::string row, nt;
        int64_t ntaps = KS;
        for (size_t d = 0, i = 0; d < static_cast<size_t>(D); ++d) {
          if (!ph.on[d]) continue;
          const PhaseDim& v = dims[i++];
          ntaps = ntaps / c.kernel[d] * v.nt;
          row += S(v.e) + ", " + S(v.kf) + ", " + S(v.bs) + ", ";
          nt += S(v.nt) + ", ";
        }
        const int64_t trips = ConvTapMajor(op) ? ntaps * cb : (cin_g * ntaps + s.bk - 1) / s.bk;
        table += (p ? ", (" : "(") + (stats ? S(p) + ", " : std::string()) + row + nt + S(trips) + ")";
      }
      l.Line("# per output phase: its residues, first taps and input offsets, its tap counts along the phased "
             "dimensions, and its main loop's trip count");
      phases.emplace(l.Open("for " + phase_args + phase_consts + "KT in (" + table + "):"));
      call += ", " + phase_args.substr(0, phase_args.size() - 2);
      for (int d = 0; d < D; ++d) {
        if (ph.on[d]) call += ", NT" + S(d) + "=NT" + S(d);
      }
      call += ", KT=KT";
    }
    call += ", M=" + S(rows) + ", NG=" + S(ng) + ", KG=" + S(op.K) + ", BM=" + S(s.bm) + ", BN=" + S(s.bn) + ", BK=" + S(s.bk) + ", GROUP_M=" + S(s.group_m) +
            ", num_warps=" + S(s.warps) + ", num_stages=" + S(s.stages) + ")";
    l.Line(call);
    phases.reset();
    if (stats) EmitStatsMergeCall(op, s, *stats, k, &l);
    std::string ret = "return ";
    for (size_t i = 0; i < outputs.size(); ++i) ret += (i ? ", " : "") + outputs[i];
    l.Line(ret + (stats ? ", (mean, var)" : ""));
  }
  *src += w.str() + "\n\n" + l.str() + "\n\n";
  return Status::Ok();
}

}  // namespace ax::builtin
