// Emission of split-row (coop) kernels: each long row split over KS programs
// that keep their chunk in registers and exchange partial results through
// pa, pb and the row's counter, so x is read once. Work item `item` is chunk
// item % KS of row item // KS; PHASE 2 runs with every program resident (a
// cooperative launch), PHASE 0 and 1 are its two halves in two ordinary
// launches, and PHASE 3 the forms that apply a row's result a round later
// (re-read from L2, or held in registers). Also `_ax_coop_launch`, the
// launcher helper they share.
#include <algorithm>
#include <string>

#include "builtin/reduce_emit.h"

namespace ax::builtin {

using namespace red;

namespace {

// How a norm's split-row kernel applies a row's result (RedSchedule::lag).
enum class CoopForm { kHeld, kReRead, kHeldARound };

// The split-row grid: chunk elements per program, KS chunks per row (KP: a
// power of two >= KS for the partials' tile), warps and programs per SM.
struct CoopGrid {
  int64_t chunk = 0, ks = 0, kp = 0;
  int warps = 4, per_sm = 1;
};

CoopGrid MakeGrid(int64_t R, int64_t chunk, int warps, int per_sm) {
  CoopGrid c;
  c.chunk = chunk;
  c.ks = CeilDiv(R, chunk);
  c.kp = std::max<int64_t>(2, Pow2Ceil(c.ks));
  c.warps = warps;
  c.per_sm = per_sm;
  return c;
}

// `text` with `kwarg` added to every call of `call` (e.g. "tl.load("): the
// prologue's loads come as lines, so an eviction policy reaches them so.
std::string WithKwarg(std::string text, const std::string& call, const std::string& kwarg) {
  size_t at = 0;
  while ((at = text.find(call, at)) != std::string::npos) {
    size_t i = at + call.size();
    int depth = 1;
    for (; i < text.size() && depth > 0; ++i) {
      if (text[i] == '(') ++depth;
      if (text[i] == ')') --depth;
    }
    if (depth != 0) break;
    text.insert(i - 1, ", " + kwarg);
    at = i + kwarg.size();
  }
  return text;
}

// `@triton.jit`, the kernel's signature and what the form does, as a comment;
// the body goes inside the returned block.
[[nodiscard]] PyWriter::Block CoopKernel(const RedKernel& rk, PyWriter& w, const std::string& params,
                                         const std::string& consts, CoopForm form) {
  const Geometry& g = rk.geo();
  w.Line("@triton.jit");
  w.Line("def _ax_red" + rk.k + "_coop(" + params +
         "pa, pb, cnt, G, ROUNDS: tl.constexpr, PHASE: tl.constexpr, CHUNK: tl.constexpr, KS: tl.constexpr,");
  PyWriter::Block body = w.Open("                    KP: tl.constexpr" + consts + "):");
  w.Line("# " + rk.op.kind + " over a [" + I(g.rows) + " x " + I(g.R) + "] view of " + PyShape(rk.op.in_shape) +
         ", each row split over KS programs: a");
  switch (form) {
    case CoopForm::kHeldARound:
      w.Line("# program stores its chunk's partial results and keeps the chunk in registers for a round;");
      w.Line("# then it applies the finished row's results to the chunk it read a round earlier, so x is");
      w.Line("# read once and no program waits for the rest of the row it is reading");
      break;
    case CoopForm::kReRead:
      w.Line("# program stores its chunk's partial results, then applies the finished row's results to");
      w.Line("# the chunk KS items back, read again from L2, so x is read from memory once");
      break;
    case CoopForm::kHeld:
      w.Line("# program keeps its chunk in registers while the row's programs exchange partial results");
      w.Line("# through pa, pb and the row's counter, so x is read once");
      break;
  }
  return body;
}

// The item's row, mask and addresses; then (load) its chunk into v, with
// `kwarg` added to the loads when given.
void Chunk(const RedKernel& rk, PyWriter& w, const std::string& other, bool load = true, const std::string& kwarg = "") {
  const Geometry& g = rk.geo();
  w.Line("rows = (tl.zeros([1], dtype=tl.int32) + item // KS)" + rk.Cast());
  w.Line("rvalid = rows < " + I(g.rows));
  w.Line("row2 = rows[:, None]");
  w.Line("rmask = rvalid[:, None]");
  w.Line("base = " + rk.Base());
  w.Line("r = ((item % KS) * CHUNK + tl.arange(0, CHUNK)[None, :])" + rk.Cast());
  w.Line("m = rmask & (r < " + I(g.R) + ")");
  w.Line("addr = base + " + rk.Off());
  if (!load) return;
  if (kwarg.empty()) {
    rk.Load(w, other, true);
    return;
  }
  PyWriter lines;
  rk.Load(lines, other, true);
  w.Text(WithKwarg(lines.str(), "tl.load(", kwarg));
}

// Waits until the row's KS programs have stored their partial results; ks,
// at: the row's partial results.
void WaitForRow(PyWriter& w) {
  w.Line("seen = tl.atomic_add(cnt + item // KS, 0, sem='acquire')");
  {
    auto spin = w.Open("while seen < KS:");
    w.Line("seen = tl.atomic_add(cnt + item // KS, 0, sem='acquire')");
  }
  w.Line("ks = tl.arange(0, KP)");
  w.Line("at = (item // KS) * KS + ks");
}

// The first half of an item: its partial results stored (`stores`), then the
// row's counter raised.
void Partials(PyWriter& w, const std::string& stores) {
  auto first = w.Open("if PHASE != 1:");
  w.Text(stores);
  w.Line("tl.atomic_add(cnt + item // KS, 1, sem='release')");
}

// The partial-results buffers and the launch through _ax_coop_launch.
void Launch(const RedKernel& rk, PyWriter& w, const CoopGrid& c, const std::string& outs, const std::string& meta) {
  const std::string ROWS = I(rk.geo().rows), KS = I(c.ks);
  w.Line("pa = torch.empty((" + ROWS + " * " + KS + ",), device=" + rk.dev + ", dtype=torch.float32)");
  w.Line("pb = torch.empty((" + ROWS + " * " + KS + ",), device=" + rk.dev + ", dtype=torch.float32)");
  w.Line("cnt = torch.zeros((" + ROWS + ",), device=" + rk.dev + ", dtype=torch.int32)");
  w.Line("_ax_coop_launch(_ax_red" + rk.k + "_coop, " + rk.dev + ", (" + rk.xparams + ", " + outs + "pa, pb, cnt), " + ROWS +
         " * " + KS + ", " + KS + ", " + I(c.per_sm) + ",");
  w.Line("                " + meta + "CHUNK=" + I(c.chunk) + ", KS=" + KS + ", KP=" + I(c.kp) + ", num_warps=" + I(c.warps) + ")");
}

// The norm's apply of a finished row to `val` (the chunk): the row's mean and
// variance merged from its chunks' partials (Chan's formula), then the
// weight and bias (`affine` lines), stored with `store_kwarg`.
void NormApply(const RedKernel& rk, PyWriter& w, const std::string& val, const std::string& affine,
               const std::string& store_kwarg) {
  const std::string R = I(rk.geo().R);
  WaitForRow(w);
  w.Line("sv = tl.load(pa + at, mask=ks < KS, other=0.0, volatile=True)");
  w.Line("qv = tl.load(pb + at, mask=ks < KS, other=0.0, volatile=True)");
  w.Line("nv = tl.where(ks < KS, tl.minimum(" + R + " - ks * CHUNK, CHUNK), 0).to(tl.float32)");
  w.Line("mu = tl.sum(sv, axis=0) / " + R + ".0");
  w.Line("dm = tl.where(ks < KS, sv / tl.maximum(nv, 1.0) - mu, 0.0)");
  w.Line("va = tl.sum(qv + nv * dm * dm, axis=0) / " + R + ".0");
  w.Line("y = (" + val + " - mu) / tl.sqrt(va + " + PyFloat(rk.op.eps) + ")");
  w.Text(affine);
  w.Line("tl.store(out + addr, y, mask=m" + store_kwarg + ")");
  auto first = w.Open("if item % KS == 0:");
  w.Line("tl.store(mean_out + item // KS, mu)");
  w.Line("tl.store(var_out + item // KS, va)");
}

}  // namespace

// Chunk partials: the chunk's maximum and the sum of exp(v - maximum).
Status red::EmitCoopSoftmax(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const CoopGrid c = MakeGrid(rk.geo().R, rk.cs.block_r, rk.cs.warps, rk.cs.coop);
  {
    auto kernel = CoopKernel(rk, w, rk.xparams + ", out, ", "", CoopForm::kHeld);
    auto rounds = w.Open("for t in range(0, ROUNDS):");
    w.Line("item = tl.program_id(0) + t * G");
    auto in_range = w.Open("if item < " + I(rk.geo().rows) + " * KS:");
    Chunk(rk, w, NeutralOther(op.kind));
    Partials(w,
             "A = tl.max(tl.max(v, axis=1), axis=0)\n"
             "e = tl.exp(v - tl.where(A == float('-inf'), 0.0, A))\n"
             "tl.store(pa + item, A)\n"
             "tl.store(pb + item, tl.sum(tl.sum(e, axis=1), axis=0))\n");
    auto second = w.Open("if PHASE != 0:");
    WaitForRow(w);
    w.Line("av = tl.load(pa + at, mask=ks < KS, other=float('-inf'), volatile=True)");
    w.Line("bv = tl.load(pb + at, mask=ks < KS, other=0.0, volatile=True)");
    w.Line("mx = tl.max(av, axis=0)");
    w.Line("safe = tl.where(mx == float('-inf'), 0.0, mx)");
    w.Line("tot = tl.sum(bv * tl.exp(av - safe), axis=0)");
    w.Line(std::string("tl.store(out + addr, ") +
           (op.kind == "softmax" ? "tl.exp(v - safe) / tot" : "v - (safe + tl.log(tot))") + ", mask=m)");
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams);
    w.Line("out = torch.empty(" + PyShape(op.in_shape) + ", device=" + rk.dev + ", dtype=torch.float32)");
    Launch(rk, w, c, "out, ", "");
    w.Line("return out");
  }
  EndDef(w);
  return Status::Ok();
}

// Chunk partials: the chunk's sum and its sum of squared deviations from the
// chunk's mean (exact, from registers), merged per row by Chan's formula;
// the chunk of item i holds min(CHUNK, R - i * CHUNK) elements.
Status red::EmitCoopNorm(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const Geometry& g = rk.geo();
  const CoopGrid c = MakeGrid(g.R, rk.cs.block_r, rk.cs.warps, rk.cs.coop);
  const std::string R = I(g.R), in_range = "item < " + I(g.rows) + " * KS";
  // A chunk that lies within one channel (channels a whole number of chunks,
  // rows a whole number of channels, each row one run of addresses) loads its
  // weight and bias once, not per element: group norm over [896, 2097152] on
  // an H200, 4.27 ms of GPU time against 4.60 (2026-12-02, held a round).
  PyWriter affine;
  const bool one_run = (g.IN == 1 && g.S3 == 1) || g.IN >= g.R;
  const int64_t row_step = g.RD == 1 ? g.S1 : g.RD >= g.rows ? g.S2 : 0;
  if (op.affine && op.ch_div > 1 && op.ch_div % rk.cs.block_r == 0 && one_run && row_step > 0 && row_step % op.ch_div == 0) {
    affine.Line("c = ((base + (item % KS) * CHUNK) // " + I(op.ch_div) + ") % " + I(op.ch_mod) + "  # the chunk's channel");
    affine.Line("y = y * tl.load(w + c)");
    auto has_b = affine.Open("if HAS_B:");
    affine.Line("y = y + tl.load(b + c)");
  } else {
    NormAffine(op, affine);
  }
  const std::string stats =
      "v0 = tl.where(m, v, 0.0)\n"
      "n_i = tl.minimum(" + R + " - (item % KS) * CHUNK, CHUNK).to(tl.float32)\n"
      "cs = tl.sum(tl.sum(v0, axis=1), axis=0)\n"
      "d = tl.where(m, v - cs / n_i, 0.0)\n"
      "tl.store(pa + item, cs)\n"
      "tl.store(pb + item, tl.sum(tl.sum(d * d, axis=1), axis=0))\n";
  std::string meta = "HAS_B=getattr(mod, \"bias\", None) is not None, ";
  const CoopForm form = rk.cs.lag == 2 ? CoopForm::kHeldARound : rk.cs.lag > 0 ? CoopForm::kReRead : CoopForm::kHeld;
  {
    auto kernel = CoopKernel(rk, w, rk.xparams + ", out, mean_out, var_out, w, b, ", ", HAS_B: tl.constexpr", form);
    if (form == CoopForm::kHeldARound) {
      // Each item's chunk is read with a mask (past the last item it reads
      // nothing), and the chunk of a round earlier, still in registers as
      // prev, is applied once its row is complete.
      w.Line("prev = tl.zeros([1, CHUNK], dtype=tl.float32)");
      auto rounds = w.Open("for t in range(0, ROUNDS):");
      w.Line("item = tl.program_id(0) + t * G");
      Chunk(rk, w, "0.0");
      w.Line("cur = v.to(tl.float32)");
      {
        auto now = w.Open("if " + in_range + ":");
        Partials(w, stats);
        auto second = w.Open("if (PHASE == 1) or (PHASE == 2):");
        NormApply(rk, w, "v", affine.str(), "");
      }
      {
        auto later = w.Open("if PHASE == 3:");
        w.Line("item = tl.program_id(0) + t * G - G");
        auto done = w.Open("if (item >= 0) & (" + in_range + "):");
        Chunk(rk, w, "0.0", false);
        NormApply(rk, w, "prev", affine.str(), ", cache_modifier='.cs'");
      }
      w.Line("prev = cur");
      meta += "lag=2, ";
    } else {
      auto rounds = w.Open("for t in range(0, ROUNDS):");
      w.Line("item = tl.program_id(0) + t * G");
      const bool reread = form == CoopForm::kReRead;
      {
        auto now = w.Open("if " + in_range + ":");
        // Re-read: the first read asks L2 to keep the chunk, the second and
        // the output's store ask it not to.
        Chunk(rk, w, "0.0", true, reread ? "eviction_policy='evict_last'" : "");
        Partials(w, stats);
        auto second = w.Open(reread ? "if (PHASE == 1) or (PHASE == 2):" : "if PHASE != 0:");
        NormApply(rk, w, "v", affine.str(), "");
      }
      if (reread) {
        // Each round a program stores its chunk's partial results, then
        // applies the row's result to the chunk KS items back, whose row is
        // complete by then, so no program waits for the rest of its own row.
        // Under the interpreter it runs as one program.
        auto later = w.Open("if PHASE == 3:");
        w.Line("item = tl.program_id(0) + t * G - KS");
        auto done = w.Open("if (item >= 0) & (" + in_range + "):");
        Chunk(rk, w, "0.0", true, "eviction_policy='evict_first'");
        NormApply(rk, w, "v", affine.str(), ", cache_modifier='.cs'");
        meta += "lag=True, ";
      }
    }
  }
  EndDef(w);
  {
    auto launcher = NormLauncher(rk, w);
    Launch(rk, w, c, "out, mean, var, w, b, ", meta);
    NormRunningStats(rk, w);
    w.Line("return out");
  }
  EndDef(w);
  return Status::Ok();
}

// Split-row: each program reduces its chunk (held in registers), the row's
// programs merge their partial results, and each runs the epilogue on its
// chunk from registers: the input is read once. Defaults: chunks of 4096, 4
// warps, 16 programs per SM (fewer when they do not fit). H200, L1
// normalisation of [32768, 65535]: 5.07 ms; 2048/2/16 5.08, 4096/4/8 5.26,
// 8192/8/4 (the norms') 5.50, 8192/8/2 5.92, 16384/16/2 7.16.
Status red::EmitCoopEpilogue(const RedKernel& rk, PyWriter& w) {
  const RedOp& op = rk.op;
  const ReductionEpilogue& epi = *rk.epi;
  const RedSchedule& want = rk.want;
  const int64_t chunk = want.block_r > 0 ? std::clamp<int64_t>(Pow2Ceil(want.block_r), 512, 16384) : 4096;
  const CoopGrid c = MakeGrid(rk.geo().R, chunk, want.warps > 0 ? want.warps : 4,
                              want.coop > 0 ? std::min(want.coop, 32) : kCoopEpiloguePerSm);
  const std::string neutral = op.kind == "amax" ? "float('-inf')" : op.kind == "amin" ? "float('inf')" : "0.0";
  const std::string reduce = op.kind == "amax" ? "_ax_nanmax" : op.kind == "amin" ? "_ax_nanmin" : "tl.sum";
  std::string eparams, outs, rets;
  for (const auto& prm : epi.params) eparams += ", " + prm;
  for (size_t i = 0; i < epi.outputs; ++i) {
    outs += ", out" + std::to_string(i);
    rets += (i ? ", out" : "out") + std::to_string(i);
  }
  {
    auto kernel = CoopKernel(rk, w, rk.xparams + eparams + outs + ", ", "", CoopForm::kHeld);
    auto rounds = w.Open("for t in range(0, ROUNDS):");
    w.Line("item = tl.program_id(0) + t * G");
    auto in_range = w.Open("if item < " + I(rk.geo().rows) + " * KS:");
    Chunk(rk, w, neutral);
    Partials(w, "tl.store(pa + item, " + reduce + "(" + reduce + "(v, axis=1), axis=0))\n");
    auto second = w.Open("if PHASE != 0:");
    WaitForRow(w);
    w.Line("av = tl.load(pa + at, mask=ks < KS, other=" + neutral + ", volatile=True)");
    w.Line("red2 = tl.zeros([1, 1], dtype=tl.float32) + " + reduce + "(av, axis=0)" +
           (op.kind == "mean" ? " / " + PyFloat(static_cast<double>(rk.geo().R)) : ""));
    w.Text(epi.once);
    w.Line("offs = addr");
    w.Text(epi.coop_lines);
  }
  EndDef(w);
  {
    auto launcher = rk.Launcher(w, rk.xparams + eparams);
    w.Text(epi.head);
    for (size_t i = 0; i < epi.outputs; ++i) {
      w.Line("out" + std::to_string(i) + " = torch.empty(" + PyShape(op.in_shape) + ", device=" + rk.dev +
             ", dtype=torch.float32)");
    }
    Launch(rk, w, c, (eparams + outs).substr(2) + ", ", "");
    w.Line("return " + rets);
  }
  EndDef(w);
  return Status::Ok();
}

const char* CoopLaunchHelper() {
  return R"(import os

_ax_coop_fits = {}


def _ax_coop_launch(kernel, dev, args, items, ks, per_sm, lag=False, **meta):
    """Runs a split-row kernel over `items` chunks, `ks` per row. On a GPU: one
    cooperative launch of per_sm programs per SM (fewer when they do not fit),
    every program resident, so the programs of a row can wait for each other's
    partial results while keeping their chunks in registers (x read once); with
    lag (True), each program applies finished rows to chunks ks items back
    instead, and with lag=2 to the chunk it read a round earlier (a grid of at
    least ks programs). Under the interpreter a lag=True kernel runs as one
    program, items in order. Otherwise, off CUDA, or when no such grid fits:
    two ordinary launches, the partial results and then the rest (x read
    twice)."""
    interpret = os.environ.get("TRITON_INTERPRET", "0") == "1"
    held = lag == 2
    if dev.type == "cuda" and not interpret:
        key = (kernel, per_sm, dev.index)
        p = _ax_coop_fits.get(key, per_sm)
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        while p > 0:
            g = min(sms * p if lag else sms * p // ks * ks, items)
            if g > 0 and (g >= ks or not held):
                rounds = triton.cdiv(items, g) + 1 if held else triton.cdiv(items + (ks if lag else 0), g)
                try:
                    kernel[(g,)](*args, g, ROUNDS=rounds, PHASE=3 if lag else 2,
                                 launch_cooperative_grid=True, **meta)
                    _ax_coop_fits[key] = p
                    return
                except RuntimeError as e:
                    if "cooperative" not in str(e):
                        raise
            p -= 1
        _ax_coop_fits[key] = 0
    elif lag and interpret and not held:
        kernel[(1,)](*args, 1, ROUNDS=items + ks, PHASE=3, **meta)
        return
    kernel[(items,)](*args, items, ROUNDS=1, PHASE=0, **meta)
    kernel[(items,)](*args, items, ROUNDS=1, PHASE=1, **meta)


)";
}

}  // namespace ax::builtin
