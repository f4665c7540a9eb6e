#include "builtin/conv_index.h"

#include <numeric>

#include "builtin/gemm_reduce.h"

namespace ax::builtin::conv_index {

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

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

// The positions a pooling's windows cover (the pooled positions per image).
int64_t PooledPositions(const RedOp& pool) {
  int64_t q = 1;
  for (size_t d = 2; d < pool.out_shape.size(); ++d) q *= pool.out_shape[d];
  return q;
}

// EmitRows for a kernel that pools its output (gemm_reduce.h): the rows go
// window by window, m = (batch, pooled position wp, position in the window
// wo), so that W consecutive rows are one window; o<d> = wp<d> * k<d> +
// wo<d>. Positions past the last whole window are not rows at all.
void EmitWindowRows(const ConvGeometry& c, const RedOp& pool, PyWriter* w) {
  const int D = c.dims;
  const int64_t W = PoolWindowSize(pool), Q = PooledPositions(pool);
  w->Line("m = rm % M");
  w->Line("nb = m // " + S(Q * W));
  w->Line("wq = (m // " + S(W) + ") % " + S(Q) + "  # the pooled position");
  w->Line("wi = m % " + S(W) + "  # the position in its window");
  std::string pq = "wq", wi = "wi", pos;
  for (int d = D - 1; d >= 0; --d) {
    const std::string sd = S(d);
    const int64_t qd = pool.out_shape[static_cast<size_t>(d) + 2], kd = pool.pool_k[static_cast<size_t>(d)];
    w->Line("wp" + sd + " = " + (d == 0 ? pq : pq + " % " + S(qd)));
    w->Line("wo" + sd + " = " + (d == 0 ? wi : wi + " % " + S(kd)));
    if (d > 0) {
      w->Line("wq" + sd + " = " + pq + " // " + S(qd));
      w->Line("wi" + sd + " = " + wi + " // " + S(kd));
      pq = "wq" + sd;
      wi = "wi" + sd;
    }
  }
  for (int d = 0; d < D; ++d) {
    const std::string sd = S(d);
    w->Line("o" + sd + " = wp" + sd + " * " + S(pool.pool_k[static_cast<size_t>(d)]) + " + wo" + sd);
    pos = d == 0 ? "o0" : "(" + pos + ") * " + S(c.out[d]) + " + o" + sd;
  }
  w->Line("sp = " + pos + "  # the output position");
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

}  // namespace ax::builtin::conv_index
