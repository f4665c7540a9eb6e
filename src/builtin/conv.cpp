#include "builtin/conv.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "builtin/conv_stats.h"
#include "builtin/ewgen.h"
#include "builtin/gemm_reduce.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::string S(int64_t v) { return std::to_string(v); }

// A transposed convolution with stride s > 1 along a dimension is computed
// by phase: an output o = y * s + e (e = o mod s, the phase) is reached only
// by the taps k with (e + pad - k * dil) divisible by s. With g = gcd(s, dil)
// those are k = kf(e) + j * (s / g), j < nt(e) (none unless g divides
// e + pad), from the inputs p = y + bs(e) - j * (dil / g), with kf(e) the
// first such tap and bs(e) = (e + pad - kf(e) * dil) / s. Each phase is one
// launch, its tap counts constants of the launch, so its loop visits only the
// taps that reach it (about 1 / s of them per phased dimension at dilation
// 1, fewer when the dilation shares a factor with the stride), where the
// gather over every tap would mask the others to zero and still multiply
// them.
struct Phasing {
  std::vector<bool> on;            // per dimension: phased
  std::vector<int64_t> rows;       // per dimension: output rows per phase (ceil(out / s) if phased, else out)
  std::vector<int64_t> tap_step;   // phased: s / g, the step between a phase's taps
  std::vector<int64_t> input_step; // phased: dil / g, the step between their inputs
  int64_t count = 1;               // phases: the product of the phased dimensions' strides
  bool Any() const { return count > 1; }
};

Phasing PhasesOf(const ConvGeometry& c) {
  Phasing ph;
  for (int d = 0; d < c.dims; ++d) {
    const bool on = c.transposed && c.stride[d] > 1;
    const int64_t g = std::gcd(c.stride[d], c.dilation[d]);
    ph.on.push_back(on);
    ph.rows.push_back(on ? (c.out[d] + c.stride[d] - 1) / c.stride[d] : c.out[d]);
    ph.tap_step.push_back(c.stride[d] / g);
    ph.input_step.push_back(c.dilation[d] / g);
    if (on) ph.count *= c.stride[d];
  }
  return ph;
}

// One phase along one dimension: its residue e, first tap kf, input offset
// bs and tap count nt.
struct PhaseDim {
  int64_t e = 0, kf = 0, bs = 0, nt = 0;
};

// Phase p's values per phased dimension (the last phased dimension fastest).
std::vector<PhaseDim> PhaseOf(const ConvGeometry& c, const Phasing& ph, int64_t p) {
  std::vector<PhaseDim> out;
  for (int d = c.dims - 1; d >= 0; --d) {
    if (!ph.on[d]) continue;
    const int64_t s = c.stride[d], dil = c.dilation[d];
    PhaseDim v;
    v.e = p % s;
    p /= s;
    v.kf = -1;
    for (int64_t k = 0; k < ph.tap_step[d] && v.kf < 0; ++k) {
      if ((v.e + c.padding[d] - k * dil) % s == 0) v.kf = k;
    }
    if (v.kf >= 0 && v.kf < c.kernel[d]) {
      v.nt = (c.kernel[d] - v.kf + ph.tap_step[d] - 1) / ph.tap_step[d];
      v.bs = (v.e + c.padding[d] - v.kf * dil) / s;  // exact
    } else {
      v.kf = 0;
    }
    out.insert(out.begin(), v);
  }
  return out;
}

// The tap index `tap` (a scalar, or a vector of the flattened loop) split
// into per-dimension indices j<d> over the phase's tap counts (NT<d>, or the
// kernel size where not phased), then k<d> (the weight's tap) and wtap (the
// weight's flattened tap).
void EmitPhasedTaps(const ConvGeometry& c, const Phasing& ph, const std::string& tap, PyWriter* w) {
  const int D = c.dims;
  std::string rest = tap;
  for (int d = D - 1; d >= 0; --d) {
    const std::string sd = S(d);
    const std::string ext = ph.on[d] ? "NT" + sd : S(c.kernel[d]);
    if (d == 0) {
      w->Line("j0 = " + rest);
    } else {
      w->Line("j" + sd + " = " + rest + " % " + ext);
      w->Line("g" + sd + " = " + rest + " // " + ext);
      rest = "g" + sd;
    }
  }
  std::string flat;
  for (int d = 0; d < D; ++d) {
    const std::string sd = S(d);
    w->Line("k" + sd + " = " + (ph.on[d] ? "kf" + sd + " + j" + sd + " * " + S(ph.tap_step[d]) : "j" + sd));
    flat = d == 0 ? "k0" : "(" + flat + ") * " + S(c.kernel[d]) + " + k" + sd;
  }
  w->Line("wtap = " + flat);
}

// The flattened tap index `tap` split into per-dimension taps k<d> over the
// whole kernel (last dimension fastest), when no dimension is phased.
void EmitTapSplit(const ConvGeometry& c, const std::string& tap, PyWriter* w) {
  std::string rest = tap;
  for (int d = c.dims - 1; d >= 0; --d) {
    if (d == 0) {
      w->Line("k0 = " + rest);
    } else {
      w->Line("k" + S(d) + " = " + rest + " % " + S(c.kernel[d]));
      w->Line("q" + S(d) + " = " + rest + " // " + S(c.kernel[d]));
      rest = "q" + S(d);
    }
  }
}

// A phased dimension's input offset of tap j: bs<d> - j<d> * (dil / g).
std::string PhasedInputOffset(const Phasing& ph, int d, const std::string& j) {
  const std::string sd = S(d);
  return "bs" + sd + " - " + j + (ph.input_step[d] == 1 ? "" : " * " + S(ph.input_step[d]));
}

// The rows' coordinates: the batch index nb, the output position o<d> and
// its flattened index sp (last dimension fastest). Phased, a row is
// (batch, y) in its phase's grid: o<d> = y<d> * s + e<d>, with the phase's
// residue e<d>, first tap kf<d> and input offset bs<d> (arguments of the
// launch), its tap counts NT<d> and its main loop's trip count KT (constants
// of the launch), and its number of taps ntaps; orow masks the rows past the
// output (the last phases have fewer).
void EmitRows(const ConvGeometry& c, const Phasing& ph, PyWriter* w) {
  const int D = c.dims;
  const int64_t per = Product(ph.rows);
  w->Line("m = rm % M");
  w->Line("nb = m // " + S(per));
  w->Line("sp = m % " + S(per));
  std::string rest = "sp";
  for (int d = D - 1; d >= 0; --d) {
    const std::string v = (ph.on[d] ? "y" : "o") + S(d);
    if (d == 0) {
      w->Line(v + " = " + rest);
    } else {
      w->Line(v + " = " + rest + " % " + S(ph.rows[d]));
      w->Line("t" + S(d) + " = " + rest + " // " + S(ph.rows[d]));
      rest = "t" + S(d);
    }
  }
  if (!ph.Any()) return;
  std::string ntaps, pos, orow;
  for (int d = 0; d < D; ++d) {
    const std::string sd = S(d);
    if (ph.on[d]) {
      w->Line("o" + sd + " = y" + sd + " * " + S(c.stride[d]) + " + e" + sd);
      orow += (orow.empty() ? "" : " & ") + std::string("(o") + sd + " < " + S(c.out[d]) + ")";
    }
    const std::string ext = ph.on[d] ? "NT" + sd : S(c.kernel[d]);
    ntaps = d == 0 ? ext : ntaps + " * " + ext;
    pos = d == 0 ? "o0" : "(" + pos + ") * " + S(c.out[d]) + " + o" + sd;
  }
  w->Line("ntaps = " + ntaps);
  w->Line("sp = " + pos + "  # the output position");
  w->Line("orow = " + orow);
}

// Whether every tap of every output position reads inside the input along
// dimension d (no padding reached), so that the kernel needs no bounds
// masks there: forward p = o * s - pad + k * dil, stride-1 transposed
// p = o + pad - k * dil. A phased dimension keeps its masks.
bool InBounds(const ConvGeometry& c, const Phasing& ph, int d) {
  if (ph.on[d]) return false;
  const int64_t reach = (c.kernel[d] - 1) * c.dilation[d];
  if (c.transposed) return c.padding[d] - reach >= 0 && c.out[d] - 1 + c.padding[d] < c.in[d];
  return c.padding[d] == 0 && (c.out[d] - 1) * c.stride[d] + reach < c.in[d];
}

bool AllInBounds(const ConvGeometry& c, const Phasing& ph) {
  if (ph.Any()) return false;
  for (int d = 0; d < c.dims; ++d) {
    if (!InBounds(c, ph, d)) return false;
  }
  return true;
}

// With every dimension in bounds, an input offset splits into a part of the
// output position (rows: o * s - pad, or o + pad transposed) and a part of
// the tap (columns: k * dil, or -k * dil transposed), each over the input's
// spatial strides; `part` is "row" or "tap".
std::string SplitOffset(const ConvGeometry& c, const std::string& part) {
  std::string e;
  for (int d = 0; d < c.dims; ++d) {
    const std::string sd = S(d);
    std::string t;
    if (part == "row") {
      t = c.transposed ? "(o" + sd + " + " + S(c.padding[d]) + ")" : "o" + sd + " * " + S(c.stride[d]);
    } else {
      t = std::string(c.transposed ? "-" : "") + "k" + sd + " * " + S(c.dilation[d]);
    }
    e = d == 0 ? t : "(" + e + ") * " + S(c.in[d]) + " + " + t;
  }
  return e;
}

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
                const Group* epi, std::string* src, const ColumnTail* column, const ConvStatsTail* stats) {
  if (!ConvScheduleValid(op, s)) return Status::Error("a convolution schedule out of range");
  if (stats && ConvDirect(op)) return Status::Error("norm statistics in a direct convolution's kernel");
  if (stats && (column || !NormRowsOf(*stats->norm, op, nullptr) || s.bm > ConvRowsPerImage(op))) {
    return Status::Error("norm statistics that the convolution's tiles do not hold");
  }
  if (column && (!ReducesColumns(*column->op, op) || s.bn < op.N)) {
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
  const int64_t rows = c.batch * Product(ph.rows);  // M: rows per group and phase
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
    if (column) what += "; then " + ColumnTailDescription(*column, "the output channels");
    if (stats) what += "; then the " + stats->norm->norm_class + "'s partial statistics";
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
    EmitRows(c, ph, &w);
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
    if (column) {
      // one value per (batch, output position)
      cs = {*column, std::string("nb") + (wide ? ".to(tl.int64)" : "") + " * " + S(OS) + " + sp",
            std::string("(rm < M)") + (ph.Any() ? " & orow" : ""), "(rn < NG)[None, :]", "output channels"};
    }
    std::string value;
    Status st = EmitAccumulatorStore(g, epi, self, &w, column ? &cs : nullptr, &value);
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
  head += ColumnPostSignature(column);
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
    for (const auto& o : outputs) {
      l.Line(o + " = torch.empty(" + PyShape(out_shape) + ", device=x.device, dtype=torch.float32)");
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
