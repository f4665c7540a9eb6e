// Emission of reduction kernels (internal to src/builtin): the values every
// kernel of one reduction is written from (RedKernel), and the writers of
// each family, one file each: rows (sum, mean, max, min and their epilogues,
// arg reductions, scans: reduce_emit_rows.cpp), the softmax family and cross
// entropy (reduce_emit_softmax.cpp), pools (reduce_emit_pool.cpp), norms
// (reduce_emit_norm.cpp) and the split-row kernels (reduce_emit_coop.cpp).
// EmitReduction (reduce_emit.cpp) resolves the schedule and dispatches.
#pragma once

#include <cstdint>
#include <string>

#include "builtin/pywriter.h"
#include "builtin/reduce.h"
#include "builtin/reduce_internal.h"
#include "common/status.h"

namespace ax::builtin::red {

// One reduction's kernel parameters, resolved once for all its kernels.
struct RedKernel {
  RedKernel(const RedOp& o, const RedSchedule& w, const RedSchedule& sched, const ReductionPrologue* p,
            const ReductionEpilogue* e)
      : op(o), want(w), s(sched), cs(sched), pro(p), epi(e) {}

  const RedOp& op;
  RedSchedule want;  // the plan's request (the split-row epilogue reads it)
  RedSchedule s;     // the ordinary kernel's schedule
  RedSchedule cs;    // the split-row kernel's (cs.coop > 0 when one is used)
  const ReductionPrologue* pro = nullptr;
  const ReductionEpilogue* epi = nullptr;
  std::string k;        // the kernel's number, as text
  std::string xparams;  // the kernel's input: x, or the prologue's inputs
  std::string dev;      // a device expression for the launcher's allocations
  bool big = false;     // flat indices need int64
  bool blocked = false;  // rows taken as blocks of RD consecutive rows (RowHead)

  const Geometry& geo() const { return op.geo; }
  std::string Cast() const { return big ? ".to(tl.int64)" : ""; }
  // The address formula's parts over row2 ([BLOCK_M, 1]) and r ([1, BLOCK_R]).
  std::string Base() const;
  std::string Off() const;
  // The grid's first dimension for the ordinary kernel.
  std::string Grid0() const;
  // Columns per split: the range program_id(1) reduces.
  int64_t Chunk() const { return CeilDiv(CeilDiv(geo().R, s.split), s.block_r) * s.block_r; }

  // `@triton.jit` and the row kernel's signature `_ax_red<k><suffix>(params
  // BLOCK_M, BLOCK_R)`, then (inside the returned block) its rows: rows,
  // rvalid, row2, rmask and base (blocks of RD rows when blocked).
  [[nodiscard]] PyWriter::Block RowKernel(PyWriter& w, const std::string& params, const std::string& kind,
                                          const std::string& suffix = "_kernel") const;
  // The lines leaving in v the element at base + off (addr: at `addr`),
  // `other` where the mask m is off: a load of x, or the prologue's values.
  void Load(PyWriter& w, const std::string& other, bool addr) const;
  // The launcher's `def _ax_red<k>(sig):` and its input checks (the
  // prologue's, or x's shape asserted and x made contiguous), inside the
  // returned block.
  [[nodiscard]] PyWriter::Block Launcher(PyWriter& w, const std::string& sig) const;
  // x's checks alone (no prologue): its shape asserted, made contiguous.
  void CheckX(PyWriter& w) const;
};

// The neutral element a masked load of op's input reads.
std::string NeutralOther(const std::string& kind);
// Two blank lines: the end of a top-level definition.
inline void EndDef(PyWriter& w) { w.Line().Line(); }

Status EmitRows(const RedKernel& rk, PyWriter& w);     // sum, mean, amax, amin, argmax, argmin, cumsum, cumprod
Status EmitSoftmax(const RedKernel& rk, PyWriter& w);  // softmax, log_softmax, logsumexp, xent
Status EmitPool(const RedKernel& rk, PyWriter& w);     // maxpool, avgpool
Status EmitNorm(const RedKernel& rk, PyWriter& w);     // norm (statistics, merge, apply)
// The split-row (coop) kernels and their launchers: a softmax or log_softmax,
// a norm (held, re-read or in two launches), and a sum, mean, max or min with
// its epilogue run from registers.
Status EmitCoopSoftmax(const RedKernel& rk, PyWriter& w);
Status EmitCoopNorm(const RedKernel& rk, PyWriter& w);
Status EmitCoopEpilogue(const RedKernel& rk, PyWriter& w);

}  // namespace ax::builtin::red

namespace ax::builtin::red {

// Norm pieces that the norm's kernels (reduce_emit_norm.cpp) share with its
// split-row kernel (reduce_emit_coop.cpp).
// The launcher of a norm that writes its output and per-row statistics itself
// (one-pass and split-row kernels): `def _ax_red<k>(x, mod):`, the input's
// checks, the allocations and the affine parameters (an input stands in for a
// missing one), inside the returned block.
[[nodiscard]] PyWriter::Block NormLauncher(const RedKernel& rk, PyWriter& w);
// The running statistics' update (batch norm in training), in a launcher
// that holds mean and var; nothing otherwise.
void NormRunningStats(const RedKernel& rk, PyWriter& w);
// y scaled by the weight and shifted by the bias of the channel of flat
// index `at` (loads under mask m); nothing for a norm without them.
void NormAffine(const RedOp& op, PyWriter& w);

}  // namespace ax::builtin::red
