// Index arithmetic of a generated convolution's kernel (conv.cpp): output
// phases of strided transposed convolutions, the rows' coordinates (plain,
// by phase, or window by window for a pooling in the kernel), the split of a
// tap index, and the bounds that let a loop drop its masks. Each function
// writes kernel lines through a PyWriter or answers a question about the
// geometry. Internal to src/builtin; conv.h is the public interface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "builtin/gemm.h"
#include "builtin/pywriter.h"
#include "builtin/reduce.h"

namespace ax::builtin::conv_index {

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

// One phase along one dimension: its residue e, first tap kf, input offset
// bs and tap count nt.
struct PhaseDim {
  int64_t e = 0, kf = 0, bs = 0, nt = 0;
};

// The product of v's entries (1 when empty).
int64_t Product(const std::vector<int64_t>& v);

// v as a Python literal.
inline std::string S(int64_t v) { return std::to_string(v); }

// How c's output is split into phases (none unless c is a transposed
// convolution strided along some dimension).
Phasing PhasesOf(const ConvGeometry& c);

// Phase p's values per phased dimension (the last phased dimension fastest).
std::vector<PhaseDim> PhaseOf(const ConvGeometry& c, const Phasing& ph, int64_t p);

// The tap index `tap` (a scalar, or a vector of the flattened loop) split
// into per-dimension indices j<d> over the phase's tap counts (NT<d>, or the
// kernel size where not phased), then k<d> (the weight's tap) and wtap (the
// weight's flattened tap).
void EmitPhasedTaps(const ConvGeometry& c, const Phasing& ph, const std::string& tap, PyWriter* w);

// The flattened tap index `tap` split into per-dimension taps k<d> over the
// whole kernel (last dimension fastest), when no dimension is phased.
void EmitTapSplit(const ConvGeometry& c, const std::string& tap, PyWriter* w);

// A phased dimension's input offset of tap j: bs<d> - j<d> * (dil / g).
std::string PhasedInputOffset(const Phasing& ph, int d, const std::string& j);

// The rows' coordinates: the batch index nb, the output position o<d> and
// its flattened index sp (last dimension fastest). Phased, a row is
// (batch, y) in its phase's grid: o<d> = y<d> * s + e<d>, with the phase's
// residue e<d>, first tap kf<d> and input offset bs<d> (arguments of the
// launch), its tap counts NT<d> and its main loop's trip count KT (constants
// of the launch), and its number of taps ntaps; orow masks the rows past the
// output (the last phases have fewer).
void EmitRows(const ConvGeometry& c, const Phasing& ph, PyWriter* w);

// The positions a pooling's windows cover (the pooled positions per image).
int64_t PooledPositions(const RedOp& pool);

// EmitRows for a kernel that pools its output (gemm_reduce.h): the rows go
// window by window, m = (batch, pooled position wp, position in the window
// wo), so that W consecutive rows are one window; o<d> = wp<d> * k<d> +
// wo<d>. Positions past the last whole window are not rows at all.
void EmitWindowRows(const ConvGeometry& c, const RedOp& pool, PyWriter* w);

// Whether every tap of every output position reads inside the input along
// dimension d (no padding reached), so that the kernel needs no bounds
// masks there: forward p = o * s - pad + k * dil, stride-1 transposed
// p = o + pad - k * dil. A phased dimension keeps its masks.
bool InBounds(const ConvGeometry& c, const Phasing& ph, int d);

// InBounds along every dimension.
bool AllInBounds(const ConvGeometry& c, const Phasing& ph);

// With every dimension in bounds, an input offset splits into a part of the
// output position (rows: o * s - pad, or o + pad transposed) and a part of
// the tap (columns: k * dil, or -k * dil transposed), each over the input's
// spatial strides; `part` is "row" or "tap".
std::string SplitOffset(const ConvGeometry& c, const std::string& part);

}  // namespace ax::builtin::conv_index
