#include "builtin/reduce.h"

#include "builtin/fuse.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace ax::builtin {

using json = nlohmann::json;

namespace {

const std::string kF32 = "torch.float32";

int64_t Prod(const std::vector<int64_t>& s, size_t a, size_t b) {
  int64_t p = 1;
  for (size_t i = a; i < b; ++i) p *= s[i];
  return p;
}

int64_t Pow2Ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool IntValue(const json* a, int64_t* v) {
  if (!a || !a->is_object() || !a->contains("value")) return false;
  const json& x = (*a)["value"];
  if (!x.is_number_integer()) return false;
  *v = x.get<int64_t>();
  return true;
}

bool IsNoneArg(const json* a) { return !a || (a->is_object() && a->value("repr", "") == "None"); }

// dim: an int, a tuple/list of ints, or None/absent (all dimensions).
bool Dims(const json* a, size_t rank, bool absent_is_all, std::vector<int>* out) {
  std::vector<int> d;
  if (IsNoneArg(a)) {
    if (!absent_is_all) return false;
    for (size_t i = 0; i < rank; ++i) d.push_back(static_cast<int>(i));
  } else if (a->contains("tuple") || a->contains("list")) {
    const json& items = a->contains("tuple") ? (*a)["tuple"] : (*a)["list"];
    if (items.empty()) {
      if (!absent_is_all) return false;
      for (size_t i = 0; i < rank; ++i) d.push_back(static_cast<int>(i));
    }
    for (const auto& x : items) {
      int64_t v;
      if (!IntValue(&x, &v)) return false;
      d.push_back(static_cast<int>(v));
    }
  } else {
    int64_t v;
    if (!IntValue(a, &v)) return false;
    d.push_back(static_cast<int>(v));
  }
  for (auto& x : d) {
    if (x < 0) x += static_cast<int>(rank);
    if (x < 0 || x >= static_cast<int>(rank)) return false;
  }
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  *out = d;
  return true;
}

bool OnlyKw(const Node& n, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : n.kwargs.items()) {
    if (!allowed.count(k)) return false;
  }
  return true;
}

// The float32 tensor node read as argument 0.
const Node* Input(const Graph& g, const Node& n) {
  const json* a = n.Arg(0, "input");
  if (!a || !a->is_object() || !a->contains("node")) return nullptr;
  const Node* src = g.Find((*a)["node"].get<std::string>());
  if (!src || !src->is_tensor || src->dtype != kF32 || src->shape.empty()) return nullptr;
  return src;
}

// A flip of a float32 tensor over exactly one dimension: that dimension.
bool FlipDim(const Graph& g, const Node& n, int* d) {
  const bool flip = (n.op == "call_function" && n.callable == "torch.flip") || (n.op == "call_method" && n.target == "flip");
  if (!flip || !OnlyKw(n, {"dims", "input"}) || n.args.size() > 2) return false;
  const Node* x = Input(g, n);
  std::vector<int> dims;
  if (!x || !Dims(n.Arg(1, "dims"), x->shape.size(), false, &dims) || dims.size() != 1) return false;
  *d = dims[0];
  return true;
}

std::string I(int64_t v) { return std::to_string(v); }

// Replaces every {KEY} in t.
std::string Fill(std::string t, const std::map<std::string, std::string>& kv) {
  for (const auto& [k, v] : kv) {
    std::string key = "{" + k + "}";
    for (size_t p = t.find(key); p != std::string::npos; p = t.find(key, p + v.size())) t.replace(p, key.size(), v);
  }
  return t;
}

// Each line of `lines` shifted by four spaces: fewer (kernel lines written for
// a loop body, used at the kernel's top level) or more (the other way round).
std::string Shift4(const std::string& lines, bool deeper) {
  std::string out;
  size_t at = 0;
  while (at < lines.size()) {
    size_t end = lines.find('\n', at);
    if (end == std::string::npos) end = lines.size();
    std::string line = lines.substr(at, end - at);
    if (deeper && !line.empty()) line = "    " + line;
    if (!deeper && line.rfind("    ", 0) == 0) line = line.substr(4);
    out += line + "\n";
    at = end + 1;
  }
  return out;
}
std::string Dedent4(const std::string& lines) { return Shift4(lines, false); }
std::string Indent4(const std::string& lines) { return Shift4(lines, true); }

// Launchers of the softmax-family kernels: one value per row (logsumexp), or
// the input's shape (softmax, log_softmax).
// A row's maximum mx and sum of exp(v - mx) tot ([BLOCK_M] each): the row in
// one tile (LOAD1 leaves it in v, -inf where masked; also e and safe), or an
// online pass over tiles (LOADV).
const char* const kRowInOneTile = R"(    r = tl.arange(0, BLOCK_R)[None, :]{CAST}
    m = rmask & (r < {R})
    addr = base + {OFF}
{LOAD1}    mx = tl.max(v, axis=1)
    safe = tl.where(mx == float('-inf'), 0.0, mx)[:, None]
    e = tl.exp(v - safe)
    tot = tl.sum(e, axis=1)
)";
const char* const kRowOnline = R"(    m_i = tl.full([BLOCK_M, BLOCK_R], float('-inf'), tl.float32)
    s_i = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    for r0 in range(0, {R}, BLOCK_R):
        r = (r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
{LOADV}        m_new = tl.maximum(m_i, v)
        s_i = tl.where(m_new == float('-inf'), 0.0, s_i * tl.exp(m_i - m_new) + tl.exp(v - m_new))
        m_i = m_new
    mx = tl.max(m_i, axis=1)
    tot = tl.sum(tl.where(m_i == float('-inf'), 0.0, s_i * tl.exp(m_i - mx[:, None])), axis=1)
)";
const char* const kRowLauncher = R"({LAUNCH_HEAD}    out = torch.empty({OUT_SHAPE}, device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[({GRID0},)]({XARGS}, out, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return out


)";
const char* const kSameShapeLauncher = R"({LAUNCH_HEAD}    out = torch.empty({IN_SHAPE}, device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[({GRID0},)]({XARGS}, out, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return out


)";

// Python expressions of the address formula over row2 ([BLOCK_M, 1]) and r ([1, BLOCK_R]).
std::string BaseExpr(const Geometry& g) {
  std::string a, b;
  if (g.RD == 1) return g.S1 == 1 ? "row2" : "row2 * " + I(g.S1);
  if (g.RD >= g.rows) return g.S2 == 1 ? "row2" : "row2 * " + I(g.S2);
  a = "(row2 // " + I(g.RD) + ") * " + I(g.S1);
  b = "(row2 % " + I(g.RD) + ")" + (g.S2 == 1 ? "" : " * " + I(g.S2));
  return a + " + " + b;
}

std::string OffExpr(const Geometry& g) {
  if (g.IN == 1) return g.S3 == 1 ? "r" : "r * " + I(g.S3);
  if (g.IN >= g.R) return "r";
  return "(r // " + I(g.IN) + ") * " + I(g.S3) + " + (r % " + I(g.IN) + ")";
}

bool RContiguous(const Geometry& g) { return (g.IN == 1 && g.S3 == 1) || g.IN >= 64; }

// A reduction over a middle block of dimensions (sum over dim 1 of [B, D1,
// D2]): consecutive rows are consecutive addresses (within one of the
// rows / RD outer blocks), and r steps over whole rows.
bool RowsContiguous(const Geometry& g) { return g.IN == 1 && g.S2 == 1 && g.RD > 1 && g.S3 == g.RD; }

// A reduction kernel's signature and its rows (rows, rvalid, row2, rmask,
// base) for the template filler: blocked, each program takes BLOCK_M rows of
// one block of RD consecutive rows (see EmitReduction).
std::string RowHead(bool blocked) {
  return blocked ? R"(@triton.jit
def _ax_red{K}_kernel({PARAMS}BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):
    # {KIND} over a [{ROWS} x {R}] view of {IN_SHAPE}: blocks of {RD} consecutive rows
    ob = (tl.program_id(0) // {NB}){CAST}
    i = (tl.program_id(0) % {NB}) * BLOCK_M + tl.arange(0, BLOCK_M)
    rows = ob * {RD} + i
    rvalid = i < {RD}
    row2 = rows[:, None]
    rmask = rvalid[:, None]
    base = ob * {S1} + i[:, None]
)"
                 : R"(@triton.jit
def _ax_red{K}_kernel({PARAMS}BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):
    # {KIND} over a [{ROWS} x {R}] view of {IN_SHAPE}
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)){CAST}
    rvalid = rows < {ROWS}
    row2 = rows[:, None]
    rmask = row2 < {ROWS}
    base = {BASE}
)";
}

// The split-row kernel's head: work item `item` is chunk item % KS of row
// item // KS, in registers as v ([1, CHUNK]); PHASE 2 runs with every program
// resident (a cooperative launch), PHASE 0 and 1 are its two halves in two
// ordinary launches. CoopTop opens the loop over the items, kCoopChunk loads
// the item's chunk (12-space indent).
// The loop head of the split-row kernel, held (PHASE 0-2) or re-read (lag).
std::string CoopTop(bool lag, bool held = false) {
  const std::string how = held  ? R"(a
    # program stores its chunk's partial results and keeps the chunk in registers for a round;
    # then it applies the finished row's results to the chunk it read a round earlier, so x is
    # read once and no program waits for the rest of the row it is reading)"
                          : lag ? R"(a
    # program stores its chunk's partial results, then applies the finished row's results to
    # the chunk KS items back, read again from L2, so x is read from memory once)"
                                : R"(a
    # program keeps its chunk in registers while the row's programs exchange partial results
    # through pa, pb and the row's counter, so x is read once)";
  const std::string head = R"(@triton.jit
def _ax_red{K}_coop({PARAMS}pa, pb, cnt, G, ROUNDS: tl.constexpr, PHASE: tl.constexpr, CHUNK: tl.constexpr, KS: tl.constexpr,
                    KP: tl.constexpr{CONSTS}):
    # {KIND} over a [{ROWS} x {R}] view of {IN_SHAPE}, each row split over KS programs: )" +
                           how + "\n";
  if (held) {
    return head + R"(    prev = tl.zeros([1, CHUNK], dtype=tl.float32)
    for t in range(0, ROUNDS):
        item = tl.program_id(0) + t * G
)";
  }
  return head + R"(    for t in range(0, ROUNDS):
        item = tl.program_id(0) + t * G
        if item < {ROWS} * KS:
)";
}
// The chunk's rows, mask and addresses; kCoopChunk then loads it.
const char* const kCoopAddr = R"(            rows = (tl.zeros([1], dtype=tl.int32) + item // KS){CAST}
            rvalid = rows < {ROWS}
            row2 = rows[:, None]
            rmask = rvalid[:, None]
            base = {BASE}
            r = ((item % KS) * CHUNK + tl.arange(0, CHUNK)[None, :]){CAST}
            m = rmask & (r < {R})
            addr = base + {OFF}
)";
const std::string kCoopChunk = std::string(kCoopAddr) + "{LOADC}";

// The re-read form's second block (RedSchedule::lag, PHASE 3): in
// each round a program stores its chunk's partial results, then applies the
// row's result to the chunk KS items back, whose row is complete by then, so
// no program waits for the rest of its own row; that chunk is read again,
// from L2 (the first read asks L2 to keep it, the second and the output's
// store ask it not to). Under the interpreter it runs as one program.
const char* const kCoopLagSecond = R"(        if PHASE == 3:
            item = tl.program_id(0) + t * G - KS
            if (item >= 0) & (item < {ROWS} * KS):
)";

// The held-a-round form's second block (RedSchedule::lag 2, PHASE 3): the
// chunk a program read a round earlier (G items back, G >= KS, so its row was
// handed out by then) is still in registers as prev; it is applied once its
// row's KS partial results are in. Each program holds two chunks, so fewer fit
// per SM; there is no second read. Under the interpreter, and when no grid
// of at least KS programs fits, it runs as the two ordinary launches.
const char* const kCoopHeldSecond = R"(        if PHASE == 3:
            item = tl.program_id(0) + t * G - G
            if (item >= 0) & (item < {ROWS} * KS):
)";

// Waits until the KS programs of the row have stored their partial results;
// ks, at: the row's partial results. kCoopWaitIf opens the second half of an
// item (PHASE 1 and 2, and 3 in the re-read form's second block).
const char* const kCoopWaitIf = R"(            if PHASE != 0:
)";
const char* const kCoopLagWaitIf = R"(            if (PHASE == 1) or (PHASE == 2):
)";
const char* const kCoopWaitBody = R"(                seen = tl.atomic_add(cnt + item // KS, 0, sem='acquire')
                while seen < KS:
                    seen = tl.atomic_add(cnt + item // KS, 0, sem='acquire')
                ks = tl.arange(0, KP)
                at = (item // KS) * KS + ks
)";

// `text` with `kwarg` added to every call of `call` (e.g. "tl.load(").
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

const char* const kCoopLaunch = R"(    _ax_coop_launch(_ax_red{K}_coop, {DEV}, ({XARGS}, {COOP_OUTS}pa, pb, cnt), {ROWS} * {KS}, {KS}, {PER_SM},
                    {COOP_META}CHUNK={CCHUNK}, KS={KS}, KP={KP}, num_warps={CW})
)";

const char* const kCoopBuffers = R"(    pa = torch.empty(({ROWS} * {KS},), device={DEV}, dtype=torch.float32)
    pb = torch.empty(({ROWS} * {KS},), device={DEV}, dtype=torch.float32)
    cnt = torch.zeros(({ROWS},), device={DEV}, dtype=torch.int32)
)";

// The launcher of a norm that writes its output and per-row statistics itself
// (one-pass and split-row kernels): allocations and the affine parameters (x
// stands in for a missing one).
const char* const kNormLaunchHead = R"(def _ax_red{K}({XARGS}, mod):
{NORM_HEAD}    out = torch.empty({IN_SHAPE}, device={DEV}, dtype=torch.float32)
    mean = torch.empty(({ROWS},), device={DEV}, dtype=torch.float32)
    var = torch.empty(({ROWS},), device={DEV}, dtype=torch.float32)
    w = mod.weight if getattr(mod, "weight", None) is not None else {WB}
    b = mod.bias if getattr(mod, "bias", None) is not None else {WB}
)";

}  // namespace

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
  RedSchedule s = ResolveSchedule(lead, want);
  const bool big = g.numel() >= (int64_t{1} << 31) - (int64_t{1} << 20);
  const int64_t chunk = CeilDiv(CeilDiv(g.R, s.split), s.block_r) * s.block_r;
  const bool blocked = RowsContiguous(g) && g.RD < g.rows;
  std::string xparams;
  for (size_t i = 0; i < pro.params.size(); ++i) xparams += (i ? ", " : "") + pro.params[i];
  std::string outs, accs, combine, stores, allocs, parts, rets;
  for (size_t j = 0; j < ops.size(); ++j) {
    const RedOp& op = *ops[j];
    const std::string sj = I(static_cast<int64_t>(j));
    const std::string neutral = op.kind == "amax" ? "float('-inf')" : op.kind == "amin" ? "float('inf')" : "0.0";
    const std::string reduce = op.kind == "amax" ? "_ax_nanmax" : op.kind == "amin" ? "_ax_nanmin" : "tl.sum";
    const std::string v = "tl.where(m, " + pro.results[j] + ", " + neutral + ")";
    outs += "out" + sj + ", ";
    parts += ", part" + sj;
    accs += "    acc" + sj + " = tl.full([BLOCK_M, BLOCK_R], " + neutral + ", tl.float32)\n";
    combine += "        acc" + sj + " = " +
               (op.kind == "amax"   ? "tl.maximum(acc" + sj + ", " + v + kNanArg
                : op.kind == "amin" ? "tl.minimum(acc" + sj + ", " + v + kNanArg
                                    : "acc" + sj + " + " + v) +
               "\n";
    const std::string post = op.kind == "mean" && s.split == 1 ? " / " + PyFloat(static_cast<double>(g.R)) : "";
    stores += "    tl.store(out" + sj + " + tl.program_id(1) * " + I(g.rows) + " + rows, " + reduce + "(acc" + sj +
              ", axis=1)" + post + ", mask=rvalid)\n";
    allocs += "    part" + sj + " = torch.empty((" + I(s.split) + ", " + I(g.rows) + "), device=" + pro.tensor +
              ".device, dtype=torch.float32)\n";
    std::string merge = s.split == 1 ? "part" + sj + "[0]"
                        : op.kind == "amax" ? "part" + sj + ".amax(0)"
                        : op.kind == "amin" ? "part" + sj + ".amin(0)"
                                            : "part" + sj + ".sum(0)";
    if (op.kind == "mean" && s.split > 1) merge += " / " + PyFloat(static_cast<double>(g.R));
    rets += (j ? ", " : "") + std::string("(") + merge + ").reshape(" + PyShape(op.out_shape) + ")";
  }
  std::map<std::string, std::string> kv = {
      {"K", I(static_cast<int64_t>(k))}, {"ROWS", I(g.rows)}, {"R", I(g.R)}, {"CHUNK", I(chunk)},
      {"SPLIT", I(s.split)}, {"BM", I(s.block_m)}, {"BR", I(s.block_r)}, {"W", I(s.warps)},
      {"BASE", BaseExpr(g)}, {"OFF", OffExpr(g)}, {"IN_SHAPE", PyShape(lead.in_shape)},
      {"KIND", kinds + " (sibling reductions, one pass)"}, {"CAST", big ? ".to(tl.int64)" : ""},
      {"RD", I(g.RD)}, {"NB", I(CeilDiv(g.RD, s.block_m))}, {"S1", I(g.S1)},
      {"GRID0", blocked ? I(CeilDiv(g.rows, g.RD) * CeilDiv(g.RD, s.block_m))
                        : "triton.cdiv(" + I(g.rows) + ", " + I(s.block_m) + ")"},
      {"PARAMS", xparams + ", " + outs}, {"XARGS", xparams}, {"ACCS", accs}, {"LINES", pro.lines},
      {"COMBINE", combine}, {"STORES", stores}, {"ALLOCS", allocs}, {"PARTS", parts}, {"RETS", rets},
      {"LAUNCH_HEAD", "def _ax_red" + I(static_cast<int64_t>(k)) + "(" + xparams + "):\n" + pro.head}};
  *src += Fill(RowHead(blocked) + R"(    lo = tl.program_id(1) * {CHUNK}
{ACCS}    for r0 in range(0, {CHUNK}, BLOCK_R):
        r = (lo + r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
        offs = base + {OFF}
{LINES}{COMBINE}{STORES}

{LAUNCH_HEAD}{ALLOCS}    _ax_red{K}_kernel[({GRID0}, {SPLIT})]({XARGS}{PARTS}, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return {RETS}


)", kv);
  return Status::Ok();
}

const char* NanMinMaxHelpers() {
  return R"(@triton.jit
def _ax_nanmax2(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _ax_nanmin2(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _ax_nanmax(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _ax_nanmax2)


@triton.jit
def _ax_nanmin(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _ax_nanmin2)


)";
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

std::string PyFloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string PyShape(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool MakeGeometry(const std::vector<int64_t>& shape, const std::vector<int>& reduced, Geometry* out) {
  std::set<int> red(reduced.begin(), reduced.end());
  // Dimensions of size 1 go either way; the others must split into K* R* K*
  // (one reduced block) or R* K* R* (one kept block).
  std::vector<std::pair<int64_t, bool>> dims;  // (size, reduced)
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) dims.push_back({shape[i], red.count(static_cast<int>(i)) > 0});
  }
  bool any_red = false;
  for (auto& d : dims) any_red = any_red || d.second;
  if (!any_red) return false;
  auto runs = [&](bool first) {
    std::vector<int64_t> p = {1};
    bool cur = first;
    for (auto& d : dims) {
      if (d.second != cur) {
        p.push_back(1);
        cur = d.second;
      }
      p.back() *= d.first;
    }
    return p;
  };
  // Pattern K R K: start with kept.
  std::vector<int64_t> p = runs(false);
  Geometry g;
  if (p.size() <= 3) {
    int64_t O = p[0], Rr = p.size() > 1 ? p[1] : 1, In = p.size() > 2 ? p[2] : 1;
    g.rows = O * In;
    g.R = Rr;
    g.RD = In;
    g.S1 = Rr * In;
    g.S2 = 1;
    g.IN = 1;
    g.S3 = In;
    *out = g;
    return true;
  }
  p = runs(true);
  if (p.size() <= 3) {
    int64_t O = p[0], K = p.size() > 1 ? p[1] : 1, In = p.size() > 2 ? p[2] : 1;
    g.rows = K;
    g.R = O * In;
    g.RD = K;
    g.S1 = 0;
    g.S2 = In;
    g.IN = In;
    g.S3 = K * In;
    *out = g;
    return true;
  }
  return false;
}

// nn.AdaptiveMaxPool{1,2,3}d / nn.AdaptiveAvgPool{1,2,3}d on a batched
// input, any output size (None keeps the input's), no indices. (Average
// pooling to size 1 was already lowered to a mean by the graph.)
bool ClassifyAdaptivePool(const Graph& g, const Node& n, RedOp op, RedOp* out) {
  const std::string cls = n.ModuleClass();
  const bool is_max = cls.rfind("AdaptiveMaxPool", 0) == 0, is_avg = cls.rfind("AdaptiveAvgPool", 0) == 0;
  if ((!is_max && !is_avg) || cls.size() != 17 || cls.back() != 'd' || cls[15] < '1' || cls[15] > '3') return false;
  const size_t d = static_cast<size_t>(cls[15] - '0');
  const json& attrs = n.module.contains("attrs") ? n.module["attrs"] : json::object();
  if (n.args.size() != 1 || !n.kwargs.empty() || AttrOr(attrs, "return_indices", false)) return false;
  const Node* x = Input(g, n);
  if (!x || x->shape.size() != d + 2 || n.shape.size() != d + 2 || !attrs.contains("output_size")) return false;
  const json& os = attrs["output_size"];
  std::vector<int64_t> want = {x->shape[0], x->shape[1]};
  for (size_t i = 0; i < d; ++i) {
    const json& e = os.is_array() ? (os.size() == d ? os[i] : json()) : os;
    if (e.is_null() && os.is_array() && os.size() == d) {
      want.push_back(x->shape[i + 2]);
    } else if (e.is_number_integer() && e.get<int64_t>() >= 1) {
      want.push_back(e.get<int64_t>());
    } else {
      return false;
    }
  }
  if (want != n.shape) return false;
  op.kind = is_max ? "maxpool" : "avgpool";
  op.input = x->name;
  op.in_shape = x->shape;
  op.pool_adaptive = true;
  op.pool_k.clear();
  for (size_t i = 0; i < d; ++i) {
    const int64_t L = x->shape[i + 2], O = n.shape[i + 2];
    int64_t kmax = 1;
    for (int64_t q = 0; q < O; ++q) kmax = std::max(kmax, ((q + 1) * L + O - 1) / O - (q * L) / O);
    op.pool_k.push_back(kmax);
  }
  op.pool_s.assign(d, 1);
  op.pool_p.assign(d, 0);
  op.pool_d.assign(d, 1);
  op.count_include_pad = false;  // the divisor is the window's own size, computed in the kernel
  int64_t outs = 1, vol = 1;
  for (auto v : n.shape) outs *= v;
  for (auto v : op.pool_k) vol *= v;
  op.geo = Geometry{outs, vol, outs, 0, 0, vol, 0};
  *out = op;
  return true;
}

// nn.MaxPool{1,2,3}d / nn.AvgPool{1,2,3}d on a batched [N, C, ...] input:
// any dilation (max pooling), ceil_mode either way, no indices, no divisor
// override; the adaptive ones above.
bool ClassifyPool(const Graph& g, const Node& n, RedOp op, RedOp* out) {
  const std::string cls = n.ModuleClass();
  if (cls.rfind("Adaptive", 0) == 0) return ClassifyAdaptivePool(g, n, op, out);
  const bool is_max = cls.rfind("MaxPool", 0) == 0, is_avg = cls.rfind("AvgPool", 0) == 0;
  if ((!is_max && !is_avg) || cls.size() != 9 || cls.back() != 'd' || cls[7] < '1' || cls[7] > '3') return false;
  const size_t d = static_cast<size_t>(cls[7] - '0');
  const json& attrs = n.module.contains("attrs") ? n.module["attrs"] : json::object();
  if (n.args.size() != 1 || !n.kwargs.empty()) return false;
  const Node* x = Input(g, n);
  if (!x || x->shape.size() != d + 2 || n.shape.size() != d + 2) return false;
  auto per_dim = [&](const char* k, int64_t dflt, std::vector<int64_t>* v) -> bool {
    v->clear();
    if (!attrs.contains(k) || attrs[k].is_null()) {
      if (dflt < 0) return false;
      v->assign(d, dflt);
      return true;
    }
    const json& a = attrs[k];
    if (a.is_number_integer()) {
      v->assign(d, a.get<int64_t>());
      return true;
    }
    if (!a.is_array() || a.size() != d) return false;
    for (const auto& e : a) {
      if (!e.is_number_integer()) return false;
      v->push_back(e.get<int64_t>());
    }
    return true;
  };
  std::vector<int64_t> k, s, p, dil;
  if (!per_dim("kernel_size", -1, &k) || !per_dim("padding", 0, &p)) return false;
  if (attrs.contains("stride") && !attrs["stride"].is_null() && !(attrs["stride"].is_array() && attrs["stride"].empty())) {
    if (!per_dim("stride", -1, &s)) return false;
  } else {
    s = k;
  }
  if (is_max) {
    if (!per_dim("dilation", 1, &dil) || std::any_of(dil.begin(), dil.end(), [](int64_t v) { return v < 1; })) {
      return false;
    }
  } else {
    dil.assign(d, 1);
  }
  if (AttrOr(attrs, "return_indices", false)) return false;
  const bool ceil = AttrOr(attrs, "ceil_mode", false);
  if (is_avg && attrs.contains("divisor_override") && !attrs["divisor_override"].is_null()) return false;
  std::vector<int64_t> want = {x->shape[0], x->shape[1]};
  for (size_t i = 0; i < d; ++i) {
    const int64_t span = dil[i] * (k[i] - 1) + 1;  // the window's extent in the input
    if (k[i] < 1 || s[i] < 1 || p[i] < 0 || 2 * p[i] > span || x->shape[i + 2] + 2 * p[i] < span) return false;
    const int64_t room = x->shape[i + 2] + 2 * p[i] - span;
    int64_t o = (ceil ? (room + s[i] - 1) / s[i] : room / s[i]) + 1;
    // PyTorch's rule: with ceil_mode the last window must start inside the
    // input or its left padding
    if (ceil && (o - 1) * s[i] >= x->shape[i + 2] + p[i]) --o;
    want.push_back(o);
  }
  if (want != n.shape) return false;
  op.kind = is_max ? "maxpool" : "avgpool";
  op.input = x->name;
  op.in_shape = x->shape;
  op.pool_k = k;
  op.pool_s = s;
  op.pool_p = p;
  op.pool_d = dil;
  op.count_include_pad = AttrOr(attrs, "count_include_pad", true);
  op.pool_ceil = ceil;
  int64_t outs = 1, vol = 1;
  for (auto v : n.shape) outs *= v;
  for (auto v : k) vol *= v;
  op.geo = Geometry{outs, vol, outs, 0, 0, vol, 0};
  *out = op;
  return true;
}

namespace {
// F.max_poolNd / F.avg_poolNd (and torch.max_poolNd, torch._C._nn.avg_poolNd):
// the call as the module it equals, {class, attrs} from its arguments, for
// ClassifyPool; false when it is not one or an argument is not a constant.
bool FunctionalPoolAsModule(const Node& n, Node* as_module) {
  if (n.op != "call_function") return false;
  const std::string& c = n.callable;
  const size_t dot = c.rfind('.');
  const std::string fn = dot == std::string::npos ? c : c.substr(dot + 1);
  const std::string mod = dot == std::string::npos ? "" : c.substr(0, dot);
  if (mod != "torch.nn.functional" && mod != "torch" && mod != "torch._C._nn") return false;
  // the function's parameters in order (input first) and the module class
  static const std::vector<std::string> kMax = {"input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                                                "return_indices"};
  static const std::vector<std::string> kAvg = {"input", "kernel_size", "stride", "padding", "ceil_mode",
                                                "count_include_pad", "divisor_override"};
  static const std::vector<std::string> kAdaMax = {"input", "output_size", "return_indices"};
  static const std::vector<std::string> kAdaAvg = {"input", "output_size"};
  const std::vector<std::string>* names = nullptr;
  std::string cls;
  auto dims = [&](size_t at) { return fn.size() == at + 2 && fn[at] >= '1' && fn[at] <= '3' && fn[at + 1] == 'd'; };
  if (fn.rfind("max_pool", 0) == 0 && dims(8)) {
    names = &kMax, cls = std::string("MaxPool") + fn[8] + "d";
  } else if (fn.rfind("avg_pool", 0) == 0 && dims(8)) {
    names = &kAvg, cls = std::string("AvgPool") + fn[8] + "d";
  } else if (fn.rfind("adaptive_max_pool", 0) == 0 && dims(17)) {
    names = &kAdaMax, cls = std::string("AdaptiveMaxPool") + fn[17] + "d";
  } else if (fn.rfind("adaptive_avg_pool", 0) == 0 && dims(17)) {
    names = &kAdaAvg, cls = std::string("AdaptiveAvgPool") + fn[17] + "d";
  } else {
    return false;
  }
  if (n.args.size() > names->size()) return false;
  for (const auto& [k, v] : n.kwargs.items()) {
    if (std::find(names->begin(), names->end(), k) == names->end()) return false;
  }
  json attrs = json::object();
  for (size_t i = 1; i < names->size(); ++i) {
    const json* a = n.Arg(i, (*names)[i]);
    if (!a) continue;
    json v;
    if (!PlainArg(*a, &v)) return false;
    attrs[(*names)[i]] = v;
  }
  const json* x = n.Arg(0, "input");
  if (!x) return false;
  *as_module = n;
  as_module->op = "call_module";
  as_module->args = json::array({*x});
  as_module->kwargs = json::object();
  as_module->module = json{{"class", cls}, {"attrs", attrs}};
  return true;
}

// Every reduced dimension has size 1 (and there is one): the reduction is the
// element itself, which MakeGeometry does not describe.
bool OverSizeOne(const std::vector<int64_t>& shape, const std::vector<int>& dims) {
  if (dims.empty()) return false;
  for (int d : dims) {
    if (d < 0 || d >= static_cast<int>(shape.size()) || shape[d] != 1) return false;
  }
  return true;
}
}  // namespace

bool ClassifyReduction(const Graph& g, const Node& n, RedOp* out, bool* size_one) {
  if (size_one) *size_one = false;
  const bool arg = n.target == "argmax" || n.target == "argmin";  // int64 indices
  if (!n.is_tensor || n.dtype != (arg ? "torch.int64" : kF32)) return false;
  RedOp op;
  op.out_shape = n.shape;
  if (n.op == "call_function" && n.callable == "torch.nn.functional.cross_entropy") {
    // as LowerCrossEntropy writes it: x [B, C] float32, t [B] int64, both
    // settings as keywords, a scalar out
    const Node* x = Input(g, n);
    const json* ta = n.Arg(1, "target");
    const Node* t = ta && ta->is_object() && ta->contains("node") ? g.Find((*ta)["node"].get<std::string>()) : nullptr;
    if (!x || !t || x->shape.size() != 2 || !t->is_tensor || t->dtype != "torch.int64" ||
        t->shape != std::vector<int64_t>{x->shape[0]} || !n.shape.empty() || n.args.size() != 2 ||
        !OnlyKw(n, {"reduction", "ignore_index"}) || !n.kwargs.contains("reduction") ||
        !n.kwargs.contains("ignore_index") || !n.kwargs["ignore_index"].contains("value") ||
        !n.kwargs["ignore_index"]["value"].is_number_integer()) {
      return false;
    }
    const std::string r = n.kwargs["reduction"].value("repr", "");
    if (r != "'mean'" && r != "'sum'") return false;
    op.kind = "xent";
    op.input = x->name;
    op.in_shape = x->shape;
    op.target = t->name;
    op.ignore_index = n.kwargs["ignore_index"]["value"].get<int64_t>();
    op.mean = r == "'mean'";
    if (!MakeGeometry(x->shape, {1}, &op.geo)) return false;
    *out = op;
    return true;
  }
  if (n.op == "call_module" && (n.ModuleClass().find("Pool") != std::string::npos)) {
    return ClassifyPool(g, n, op, out);
  }
  if (Node m; FunctionalPoolAsModule(n, &m)) return ClassifyPool(g, m, op, out);
  if (n.op == "call_module") {
    const std::string cls = n.ModuleClass();
    const json& attrs = n.module.contains("attrs") ? n.module["attrs"] : json::object();
    const json& params = n.module.contains("params") ? n.module["params"] : json::object();
    if (n.args.size() != 1 || !n.kwargs.empty()) return false;
    const Node* x = Input(g, n);
    if (!x || x->shape != n.shape) return false;
    op.input = x->name;
    op.in_shape = x->shape;
    op.module = n.target;
    const size_t rank = x->shape.size();
    if (cls == "Softmax" || cls == "LogSoftmax") {
      int64_t d;
      if (!attrs.contains("dim") || !attrs["dim"].is_number_integer()) return false;
      d = attrs["dim"].get<int64_t>();
      if (d < 0) d += static_cast<int64_t>(rank);
      if (d < 0 || d >= static_cast<int64_t>(rank)) return false;
      op.kind = cls == "Softmax" ? "softmax" : "log_softmax";
      op.module.clear();
      if (!MakeGeometry(x->shape, {static_cast<int>(d)}, &op.geo)) return false;
      *out = op;
      return true;
    }
    op.kind = "norm";
    op.norm_class = cls;
    // Norms without a number for eps (nn.RMSNorm's None: the dtype's epsilon) are not lowered.
    if (!attrs.contains("eps") || !attrs["eps"].is_number()) return false;
    op.eps = attrs["eps"].get<double>();
    const bool training = AttrOr(attrs, "training", true);
    const int64_t N = x->shape[0];
    if (cls == "LayerNorm") {
      auto ns = AttrOr(attrs, "normalized_shape", std::vector<int64_t>{});
      if (ns.empty() || ns.size() > rank) return false;
      for (size_t i = 0; i < ns.size(); ++i) {
        if (ns[i] != x->shape[rank - ns.size() + i]) return false;
      }
      std::vector<int> red;
      for (size_t i = rank - ns.size(); i < rank; ++i) red.push_back(static_cast<int>(i));
      int64_t R = Prod(x->shape, rank - ns.size(), rank);
      op.geo = Geometry{Prod(x->shape, 0, rank - ns.size()), R, 1, R, 0, 1, 1};
      op.affine = params.contains("weight");
      op.ch_div = 1;
      op.ch_mod = R;
      op.row_div = R;
      op.row_mod = op.geo.rows;
      *out = op;
      return true;
    }
    if (rank < 2) return false;
    const int64_t C = x->shape[1], S = Prod(x->shape, 2, rank);
    op.ch_div = S;
    op.ch_mod = C;
    if (cls == "GroupNorm" || cls.rfind("InstanceNorm", 0) == 0) {
      int64_t G = C;
      if (cls == "GroupNorm") {
        G = AttrOr(attrs, "num_groups", int64_t{0});
        if (G <= 0 || C % G) return false;
        op.affine = params.contains("weight");
      } else {
        // Instance norm with running statistics tracked is not generated.
        if (AttrOr(attrs, "track_running_stats", false)) return false;
        op.affine = params.contains("weight");
      }
      int64_t R = (C / G) * S;
      op.geo = Geometry{N * G, R, 1, R, 0, 1, 1};
      op.row_div = R;
      op.row_mod = N * G;
      *out = op;
      return true;
    }
    if (cls.rfind("BatchNorm", 0) == 0) {
      // Training-mode statistics (KernelBench builds models in training mode);
      // evaluation with running statistics stays a library call.
      if (!training) return false;
      op.affine = params.contains("weight");
      op.running_stats = AttrOr(attrs, "track_running_stats", true);
      if (attrs.contains("momentum") && attrs["momentum"].is_number()) op.momentum = attrs["momentum"].get<double>();
      else op.momentum = -1.0;  // None: cumulative average
      op.geo = Geometry{C, N * S, C, 0, S, S, C * S};
      op.row_div = S;
      op.row_mod = C;
      *out = op;
      return true;
    }
    return false;
  }
  std::string fn;
  if (n.op == "call_function" && n.target == "getitem" && n.callable == "operator.getitem") {
    // torch.max(x, dim)[0] / torch.min(x, dim)[0]: the values of a reduction
    // whose indices nobody reads.
    const json* a0 = n.Arg(0, "");
    int64_t idx;
    if (!a0 || !a0->contains("node") || !IntValue(n.Arg(1, ""), &idx) || idx != 0) return false;
    const Node* src = g.Find((*a0)["node"].get<std::string>());
    if (!src || src->users.size() != 1) return false;
    bool fn_ok = (src->op == "call_function" && (src->callable == "torch.max" || src->callable == "torch.min")) ||
                 (src->op == "call_method" && (src->target == "max" || src->target == "min"));
    if (!fn_ok || !OnlyKw(*src, {"dim", "keepdim", "input"}) || src->args.size() > 3) return false;
    const json* d = src->Arg(1, "dim");
    int64_t dv;
    if (!d || !IntValue(d, &dv)) return false;  // max(x) or max(x, y) are something else
    const Node* x = Input(g, *src);
    if (!x) return false;
    std::vector<int> dims;
    if (!Dims(d, x->shape.size(), false, &dims)) return false;
    op.input = x->name;
    op.in_shape = x->shape;
    op.kind = src->target == "max" ? "amax" : "amin";
    op.absorbed = {src->name};
    if (OverSizeOne(x->shape, dims)) {
      if (size_one) {
        *size_one = true;
        *out = op;
      }
      return false;
    }
    if (!MakeGeometry(x->shape, dims, &op.geo)) return false;
    int64_t out_numel = 1;
    for (auto v : n.shape) out_numel *= v;
    if (out_numel != op.geo.rows) return false;
    *out = op;
    return true;
  }
  if (int d_out = -1; FlipDim(g, n, &d_out)) {
    // flip(cumsum(flip(x, d), d), d): the scan from the end of each row, one
    // read of x; the inner flip and the scan (each read only by the next)
    // are absorbed.
    const Node* scan = Input(g, n);
    RedOp inner;
    if (!scan || scan->users.size() != 1 || !ClassifyReduction(g, *scan, &inner) ||
        (inner.kind != "cumsum" && inner.kind != "cumprod") || inner.reverse) {
      return false;
    }
    const Node* f = g.Find(inner.input);
    std::vector<int> sd;
    int d_in = -1;
    if (!f || f->users.size() != 1 || !FlipDim(g, *f, &d_in) ||
        !Dims(scan->Arg(1, "dim"), scan->shape.size(), false, &sd) || sd.size() != 1 || sd[0] != d_in ||
        d_in != d_out) {
      return false;
    }
    const Node* x = Input(g, *f);
    inner.input = x->name;
    inner.in_shape = x->shape;
    inner.reverse = true;
    inner.absorbed = {f->name, scan->name};
    *out = inner;
    return true;
  }
  if (n.op == "call_function") {
    const std::string& c = n.callable;
    if (c.rfind("torch.", 0) != 0 || c.rfind("torch.Tensor.", 0) == 0) return false;
  } else if (n.op != "call_method") {
    return false;
  }
  fn = n.target;
  static const std::set<std::string> kKinds = {"sum",    "mean",   "amax",   "amin",   "logsumexp", "softmax",
                                               "log_softmax", "argmax", "argmin", "cumsum", "cumprod"};
  if (!kKinds.count(fn)) return false;
  const Node* x = Input(g, n);
  if (!x) return false;
  op.input = x->name;
  op.in_shape = x->shape;
  op.kind = fn;
  const size_t rank = x->shape.size();
  std::vector<int> dims;
  if (fn == "softmax" || fn == "log_softmax") {
    if (!OnlyKw(n, {"dim", "_stacklevel", "dtype", "input"})) return false;
    if (n.kwargs.contains("dtype") && !IsNoneArg(&n.kwargs["dtype"])) return false;
    if (n.args.size() > 3) return false;
    if (n.args.size() == 3 && !IsNoneArg(&n.args[2]) && !n.args[2].contains("value")) return false;
    if (!Dims(n.Arg(1, "dim"), rank, false, &dims) || dims.size() != 1) return false;
  } else if (fn == "cumsum" || fn == "cumprod") {
    if (!OnlyKw(n, {"dim", "dtype", "input"}) || n.args.size() > 2) return false;
    if (n.kwargs.contains("dtype") && !IsNoneArg(&n.kwargs["dtype"])) return false;
    if (!Dims(n.Arg(1, "dim"), rank, false, &dims) || dims.size() != 1) return false;
  } else if (arg) {
    // argmax(x) without a dim is over the flattened tensor.
    if (!OnlyKw(n, {"dim", "keepdim", "input"}) || n.args.size() > 3) return false;
    if (!Dims(n.Arg(1, "dim"), rank, true, &dims) || (dims.size() != 1 && dims.size() != rank)) return false;
  } else {
    if (!OnlyKw(n, {"dim", "keepdim", "dtype", "input"})) return false;
    if (n.kwargs.contains("dtype") && !IsNoneArg(&n.kwargs["dtype"])) return false;
    if (n.args.size() > 3) return false;
    bool all_ok = fn != "logsumexp";
    if (!Dims(n.Arg(1, "dim"), rank, all_ok, &dims)) return false;
  }
  if (!arg && OverSizeOne(x->shape, dims)) {
    if (size_one) {
      *size_one = true;
      *out = op;
    }
    return false;
  }
  if (!MakeGeometry(x->shape, dims, &op.geo)) return false;
  int64_t out_numel = 1;
  for (auto s : n.shape) out_numel *= s;
  bool same = op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "cumsum" || op.kind == "cumprod";
  if (out_numel != (same ? op.geo.numel() : op.geo.rows)) return false;
  *out = op;
  return true;
}

namespace {
// The end of a graph rewrite: r without the dropped nodes, linked, as *out;
// g itself when nothing was rewritten or r does not link. Returns the count
// (0 in the latter cases).
int FinishRewrite(const Graph& g, Graph r, const std::set<std::string>& dropped, int count, Graph* out) {
  if (count == 0) {
    *out = g;
    return 0;
  }
  std::vector<Node> kept;
  for (auto& n : r.nodes) {
    if (!dropped.count(n.name)) kept.push_back(std::move(n));
  }
  r.nodes = std::move(kept);
  if (!LinkGraph(&r).ok()) {
    *out = g;
    return 0;
  }
  *out = std::move(r);
  return count;
}
}  // namespace

int SimplifyTrivialReductions(const Graph& g, Graph* out) {
  static const std::set<std::string> kKinds = {"sum",       "mean",   "amax",   "amin",       "logsumexp",
                                               "softmax",   "log_softmax", "cumsum", "cumprod"};
  Graph r;
  r.training = g.training;
  std::set<std::string> names, dropped;
  for (const auto& n : g.nodes) names.insert(n.name);
  auto fresh = [&](const std::string& base, const std::string& sfx) {
    std::string s = base + "_" + sfx;
    for (int k = 1; names.count(s); ++k) s = base + "_" + sfx + std::to_string(k);
    names.insert(s);
    return s;
  };
  int count = 0;
  for (const auto& n : g.nodes) {
    RedOp op;
    bool size_one = false;
    if (ClassifyReduction(g, n, &op, &size_one) || !size_one || !kKinds.count(op.kind) || op.input.empty()) {
      r.nodes.push_back(n);
      continue;
    }
    ++count;
    for (const auto& a : op.absorbed) dropped.insert(a);
    const Node& x = *g.Find(op.input);
    const json xin = {{"node", x.name}};
    auto ew = [&](const std::string& name, const std::string& target, const std::string& callable, json args) {
      Node e;
      e.name = name;
      e.op = "call_function";
      e.target = target;
      e.callable = callable;
      e.args = std::move(args);
      e.is_tensor = true;
      e.shape = x.shape;
      e.dtype = x.dtype;
      r.nodes.push_back(std::move(e));
    };
    const bool same = n.shape == x.shape;
    const std::string last = same ? n.name : fresh(n.name, "same");
    if (op.kind == "softmax") {
      const std::string d = fresh(n.name, "diff");
      ew(d, "sub", "operator.sub", json::array({xin, xin}));
      ew(last, "exp", "torch.exp", json::array({json{{"node", d}}}));
    } else if (op.kind == "log_softmax") {
      ew(last, "sub", "operator.sub", json::array({xin, xin}));
    } else {
      ew(last, "mul", "operator.mul", json::array({xin, json{{"repr", "1.0"}, {"value", 1.0}}}));
    }
    if (!same) {
      Node v;
      v.name = n.name;
      v.op = "call_function";
      v.target = "reshape";
      v.callable = "torch.reshape";
      json dims = json::array();
      for (int64_t d : n.shape) dims.push_back({{"repr", std::to_string(d)}, {"value", d}});
      v.args = json::array({json{{"node", last}}, json{{"tuple", dims}}});
      v.is_tensor = true;
      v.shape = n.shape;
      v.dtype = n.dtype;
      r.nodes.push_back(std::move(v));
    }
  }
  return FinishRewrite(g, std::move(r), dropped, count, out);
}

int FoldScalarChains(const Graph& g, Graph* out) {
  // A scalar operator on one tensor as x * k (mul: true) or x + k.
  struct Lin {
    std::string x;
    bool mul = true;
    double k = 0;
    bool div = false;  // x / k (kept as a division when only divisions fold)
  };
  std::map<std::string, Lin> form;
  std::set<std::string> dropped;
  Graph r;
  r.training = g.training;
  int count = 0;
  for (const auto& n : g.nodes) {
    EwOp op;
    Lin self;
    bool is_lin = false;
    if (n.op != "output" && n.kwargs.empty() && ClassifyElementwise(g, n, &op) && op.operands.size() == 2 &&
        op.params.empty()) {
      const EwOperand& a = op.operands[0];
      const EwOperand& b = op.operands[1];
      const bool ta = !a.node.empty(), tb = !b.node.empty();
      const Node* t = ta != tb ? g.Find(ta ? a.node : b.node) : nullptr;
      if (t && t->is_tensor && t->shape == n.shape && t->dtype == n.dtype) {
        const double c = ta ? b.value : a.value;
        if (op.fn == "mul") {
          self = {t->name, true, c, false};
          is_lin = true;
        } else if (op.fn == "div" && ta && c != 0.0) {
          self = {t->name, true, c, true};
          is_lin = true;
        } else if (op.fn == "add") {
          self = {t->name, false, c, false};
          is_lin = true;
        } else if (op.fn == "sub" && ta) {
          self = {t->name, false, -c, false};
          is_lin = true;
        }
      }
    }
    if (!is_lin) {
      r.nodes.push_back(n);
      continue;
    }
    auto it = form.find(self.x);
    const Node* inner = g.Find(self.x);
    if (it != form.end() && it->second.mul == self.mul && inner && inner->users.size() == 1) {
      const Lin& in = it->second;
      Lin both{in.x, self.mul, 0.0, false};
      if (!self.mul) {
        both.k = in.k + self.k;
      } else if (in.div && self.div) {
        both.k = in.k * self.k;  // (x / a) / b = x / (a * b)
        both.div = true;
      } else if (in.div) {
        both.k = self.k / in.k;  // (x / a) * b = x * (b / a)
      } else if (self.div) {
        both.k = in.k / self.k;  // (x * a) / b = x * (a / b)
      } else {
        both.k = in.k * self.k;
      }
      if (std::isfinite(both.k) && (!both.div || both.k != 0.0)) {
        ++count;
        dropped.insert(inner->name);
        Node e = n;
        e.op = "call_function";
        e.target = both.mul ? (both.div ? "truediv" : "mul") : "add";
        e.callable = both.mul ? (both.div ? "operator.truediv" : "operator.mul") : "operator.add";
        e.args = json::array({json{{"node", both.x}}, json{{"repr", PyFloat(both.k)}, {"value", both.k}}});
        e.kwargs = json::object();
        e.module = json();
        form[n.name] = both;
        r.nodes.push_back(std::move(e));
        continue;
      }
    }
    form[n.name] = self;
    r.nodes.push_back(n);
  }
  return FinishRewrite(g, std::move(r), dropped, count, out);
}

namespace {
// A norm's split-row kernel holds its chunks a round by default when its rows
// are at most this many 4096-element chunks (the grid, kHeldPerSm programs
// per SM, must have one program per chunk of a row: 660 on an H200).
constexpr int64_t kHeldMaxChunks = 512;
constexpr int kHeldPerSm = 5;
// Contiguous rows too long for one tile, in at most 512 chunks (the programs
// of a row must all be resident at once: 528 is 4 per SM on an H200).
bool CoopRows(const Geometry& g) { return RContiguous(g) && Pow2Ceil(g.R) > 4096 && CeilDiv(g.R, 16384) <= 512; }
// Big enough that a split-row kernel is the default (its host work, about
// three small allocations and a zero fill, is then noise).
bool CoopByDefault(const Geometry& g) { return g.numel() >= (int64_t{1} << 22); }
// A sum, mean, max or min whose epilogue runs in a split-row kernel: long
// contiguous rows, on by default for a large tensor (want.coop 0), or asked.
bool CoopEpilogue(const RedOp& op, const RedSchedule& want) {
  if (op.kind != "sum" && op.kind != "mean" && op.kind != "amax" && op.kind != "amin") return false;
  return CoopRows(op.geo) && (want.coop > 0 || (want.coop == 0 && CoopByDefault(op.geo)));
}
}  // namespace

// A softmax, log_softmax or norm over such rows.
bool CoopFits(const RedOp& op) {
  if (op.kind != "softmax" && op.kind != "log_softmax" && op.kind != "norm") return false;
  return CoopRows(op.geo);
}

RedSchedule ResolveSchedule(const RedOp& op, const RedSchedule& want) {
  RedSchedule s = want;
  if (op.kind == "maxpool" || op.kind == "avgpool") {
    // BLOCK_M output positions per program; the window is a loop.
    s.block_r = 1;
    if (s.block_m <= 0) s.block_m = 512;
    s.block_m = std::min(s.block_m, 4096);
    if (s.warps <= 0) s.warps = 4;
    s.split = 1;
    s.coop = 0;
    return s;
  }
  const Geometry& g = op.geo;
  const bool rc = RContiguous(g);
  const int64_t cap = op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp" ||
                              op.kind == "xent" || op.kind == "cumsum" || op.kind == "cumprod"
                          ? 2048
                          : 4096;
  if (op.kind == "norm" && s.block_r <= 0 && Pow2Ceil(g.R) <= 4096) {
    // the whole row in one block: statistics and apply in one kernel, one read
    s.block_r = static_cast<int>(Pow2Ceil(g.R));
    if (s.block_m <= 0) s.block_m = static_cast<int>(std::min({std::max<int64_t>(1, 4096 / s.block_r), Pow2Ceil(g.rows), int64_t{64}}));
  }
  if ((op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp" || op.kind == "xent") && rc &&
      s.block_r <= 0 && Pow2Ceil(g.R) <= 4096) {
    s.block_r = static_cast<int>(Pow2Ceil(g.R));  // the whole row in one tile: one pass
  }
  s.coop = want.coop < 0 ? -1 : 0;  // kept off when asked to be (a plan's other changes must not turn it on)
  s.lag = want.lag < 0 ? -1 : 0;
  if (CoopFits(op) && (want.coop > 0 || (want.coop == 0 && CoopByDefault(g)))) {
    // Rows longer than a tile: one split-row kernel, each program holding a
    // chunk in registers (H200, best of 9 configurations per shape: softmax
    // over [4096, 393216] 0.80 of copy with 4096-element chunks, 4 warps, 8
    // programs per SM; instance norm over [7168, 262144] 0.86 with 8192, 8
    // warps, 4 per SM; the two-kernel plans reach 0.63-0.67 there).
    const bool sm = op.kind != "norm";
    s.coop = want.coop > 0 ? std::min(want.coop, 32) : (sm ? 8 : 4);
    // A norm's chunks are re-read (lag) only when a plan asks: on an H200
    // (8192-element chunks, 8 warps, 4 per SM, judged as candidates are) it was
    // not reliably faster than holding them: group norm over [896, 2097152]
    // 5.45-5.64 ms re-read, 5.76 held, 5.44 in two kernels; layer norm over
    // [16, 4194304] 0.420-0.454 ms re-read, 0.403 held; instance norm over
    // [7168, 262144] 4.55 ms re-read, 4.35 held.
    //
    // Held a round (lag 2) is the default where rows of 4096-element chunks
    // number at most kHeldMaxChunks (H200, 2026-12-02, generated kernels, GPU
    // busy time: group norm over [896, 2097152] 4.59 ms with 4096 / 4 warps /
    // 5 per SM, 5.28 held in place; instance norm over [7168, 262144] 4.12
    // against 4.22; judged, 35 4.68 ms and 34 4.15 ms).
    if (!sm && want.lag > 0) s.lag = want.lag == 2 ? 2 : 1;
    const bool held = !sm && want.lag == 0 && CeilDiv(g.R, 4096) <= kHeldMaxChunks;
    if (held) {
      s.lag = 2;
      if (want.coop <= 0) s.coop = kHeldPerSm;
    }
    if (s.block_r <= 0) s.block_r = sm || held ? 4096 : 8192;
    s.block_r = std::clamp(s.block_r, 1024, 16384);
    if (CeilDiv(g.R, s.block_r) > 512) s.block_r = static_cast<int>(std::min<int64_t>(16384, Pow2Ceil(CeilDiv(g.R, 512))));
    s.block_m = 1;
    if (s.warps <= 0) s.warps = sm || held ? 4 : 8;
    s.split = 1;
    return s;
  }
  if (RowsContiguous(g)) {
    // rows side by side in memory, r strided: a wide tile along the rows, so
    // a warp reads consecutive addresses. An arg reduction needs 32 loads in
    // flight per lane (H200, [128, 4096, 4095] over dim 1: 256 x 16 ran at
    // 0.55 of copy, 256 x 32 at 0.97).
    const bool arg = op.kind == "argmax" || op.kind == "argmin";
    if (s.block_r <= 0) s.block_r = static_cast<int>(std::min<int64_t>(Pow2Ceil(g.R), arg ? 32 : 16));
    if (s.block_m <= 0) s.block_m = static_cast<int>(std::min<int64_t>(Pow2Ceil(g.RD), 256));
  }
  if (s.block_r <= 0) s.block_r = static_cast<int>(rc ? std::min(Pow2Ceil(g.R), cap) : std::min<int64_t>(Pow2Ceil(g.R), 32));
  if (s.block_m <= 0) {
    int64_t m = rc ? std::max<int64_t>(1, 4096 / s.block_r) : 64;
    s.block_m = static_cast<int>(std::min({m, Pow2Ceil(g.rows), int64_t{64}}));
  }
  while (static_cast<int64_t>(s.block_m) * s.block_r > 16384 && s.block_r > 16) s.block_r /= 2;
  if (s.warps <= 0) s.warps = static_cast<int64_t>(s.block_m) * s.block_r >= 4096 ? 8 : 4;
  const bool splittable = op.kind == "sum" || op.kind == "mean" || op.kind == "amax" || op.kind == "amin" ||
                          op.kind == "norm";
  if (!splittable) {
    s.split = 1;
  } else if (s.split <= 0) {
    int64_t programs = CeilDiv(g.rows, s.block_m);
    int64_t sp = 1;
    if (programs < 264 && g.R >= 8 * s.block_r) {
      // Few rows: each is split over programs. A sum, mean, max or min, and
      // a norm over contiguous rows, take 16 programs per SM of tiles of at
      // most 2048 (H200, the KL divergence terms summed over 16384^2: 0.64 ms
      // with 528 programs of 4096-element tiles, 0.57 ms so; a plain sum of
      // two tensors runs the same either way; layer-norm statistics of 16
      // rows of 4M: 0.090 -> 0.084 ms). Other norms keep 528 (not measured).
      const bool wide = op.kind != "norm" || rc;
      if (wide && want.block_r <= 0) s.block_r = std::min(s.block_r, 2048);
      sp = std::min(CeilDiv(wide ? 2112 : 528, programs), CeilDiv(g.R, 4 * s.block_r));
    }
    s.split = static_cast<int>(std::clamp<int64_t>(sp, 1, 4096));
  }
  s.split = static_cast<int>(std::clamp<int64_t>(s.split, 1, std::max<int64_t>(1, CeilDiv(g.R, s.block_r))));
  return s;
}

std::string NormApplyLines(const RedOp& op, const std::string& sfx) {
  const int64_t numel = op.geo.numel();
  auto I = [](int64_t v) { return std::to_string(v); };
  std::string row = "(offs // " + I(op.row_div) + ")";
  if (op.row_div * op.row_mod != numel) row = "(" + row + " % " + I(op.row_mod) + ")";
  if (op.row_div == 1 && op.row_mod == numel) row = "offs";
  std::string ch = "(offs // " + I(op.ch_div) + ") % " + I(op.ch_mod);
  if (op.ch_div == 1) ch = "offs % " + I(op.ch_mod);
  const std::string& s = sfx;
  std::string o;
  o += "    row" + s + " = " + row + "\n";
  o += "    v" + s + " = tl.load(x" + s + " + offs, mask=mask, other=0.0)\n";
  o += "    mu" + s + " = tl.load(mean" + s + " + row" + s + ", mask=mask, other=0.0)\n";
  o += "    va" + s + " = tl.load(var" + s + " + row" + s + ", mask=mask, other=1.0)\n";
  o += "    y" + s + " = (v" + s + " - mu" + s + ") / tl.sqrt(va" + s + " + " + PyFloat(op.eps) + ")\n";
  if (op.affine) {
    o += "    c" + s + " = " + ch + "\n";
    o += "    y" + s + " = y" + s + " * tl.load(w" + s + " + c" + s + ", mask=mask, other=0.0)\n";
    o += "    if HAS_B" + s + ":\n        y" + s + " = y" + s + " + tl.load(b" + s + " + c" + s +
         ", mask=mask, other=0.0)\n";
  }
  return o;
}

bool EpilogueFits(const RedOp& op, const RedSchedule& want) {
  const Geometry& g = op.geo;
  if (CoopEpilogue(op, want)) return true;
  if (g.rows < 256 || g.R > (int64_t{1} << 17)) return false;
  // Rows along the last dimension longer than one block: the second loop's
  // re-read misses the cache, and one kernel was measured slower than the
  // reduction plus an elementwise kernel (H200: 0.46-0.64 vs 0.65 of copy at
  // 65535 and 262144 elements per row).
  return RowsContiguous(g) || Pow2Ceil(g.R) <= 4096;
}

Status EmitReduction(const RedOp& op, size_t k, const RedSchedule& want, std::string* src,
                     const ReductionPrologue* pro, const ReductionEpilogue* epi) {
  const Geometry& g = op.geo;
  RedSchedule req = want;
  if (epi && RowsContiguous(g)) {
    // The epilogue reads each program's rows again: keep a program's tile
    // small (the re-read then hits L1/L2 before other programs evict it),
    // and when the reduced extent is short, the whole of it in one tile.
    // Measured on an H200 (RMS over dim 1 of [16, 64, 512*512]): BLOCK_M 64 x
    // BLOCK_R 64 runs at 0.95 of copy, the default 256 x 16 at 0.67.
    if (req.block_r <= 0) req.block_r = static_cast<int>(Pow2Ceil(g.R) <= 128 ? Pow2Ceil(g.R) : 32);
    if (req.block_m <= 0) {
      req.block_m = static_cast<int>(std::clamp<int64_t>(4096 / req.block_r, 1, std::min<int64_t>(Pow2Ceil(g.RD), 256)));
      if (Pow2Ceil(g.R) > 128) req.block_m = std::min(req.block_m, 32);
    }
  }
  RedSchedule s = ResolveSchedule(op, req);
  // A split-row kernel (cs.coop > 0) replaces the softmax's kernel or the
  // norm's apply; a norm's statistics kernel (for `_stats`) keeps the schedule
  // it would have without.
  const RedSchedule cs = s;
  if (cs.coop > 0) {
    RedSchedule off;
    off.coop = -1;
    s = ResolveSchedule(op, off);
  }
  if (epi) {
    if (op.kind != "sum" && op.kind != "mean" && op.kind != "amax" && op.kind != "amin") {
      return Status::Error("a reduction epilogue needs a sum, mean, max or min");
    }
    s.split = 1;  // the whole row in one program: its value is needed there
  }

  const bool big = g.numel() >= (int64_t{1} << 31) - (int64_t{1} << 20);
  const int64_t chunk = CeilDiv(CeilDiv(g.R, s.split), s.block_r) * s.block_r;
  std::map<std::string, std::string> kv = {
      {"K", I(static_cast<int64_t>(k))}, {"ROWS", I(g.rows)}, {"R", I(g.R)}, {"CHUNK", I(chunk)},
      {"SPLIT", I(s.split)}, {"BM", I(s.block_m)}, {"BR", I(s.block_r)}, {"W", I(s.warps)},
      {"BASE", BaseExpr(g)}, {"OFF", OffExpr(g)}, {"IN_SHAPE", PyShape(op.in_shape)},
      {"OUT_SHAPE", PyShape(op.out_shape)}, {"KIND", op.kind}, {"CAST", big ? ".to(tl.int64)" : ""},
      {"NUMEL", I(g.numel())}};
  // The kernel's input: x, or the inputs of an elementwise prologue computed
  // in place of loading x (its value at flat index offs, in v).
  std::string xparams = "x";
  if (pro) {
    xparams.clear();
    for (size_t i = 0; i < pro->params.size(); ++i) xparams += (i ? ", " : "") + pro->params[i];
  }
  kv["XARGS"] = xparams;
  kv["DEV"] = (pro ? pro->tensor : "x") + ".device";
  std::string sig = xparams;  // the launcher's parameters
  if (epi) {
    for (const auto& prm : epi->params) sig += ", " + prm;
  }
  kv["LAUNCH_HEAD"] = "def _ax_red" + I(static_cast<int64_t>(k)) + "(" + sig + "):\n" +
                      (pro ? pro->head
                           : "    assert list(x.shape) == " + PyShape(op.in_shape) +
                                 ", \"the kernel was generated for the traced shapes\"\n    x = x.contiguous()\n");
  auto load = [&](const std::string& other, bool addr) -> std::string {
    if (!pro) return "        v = tl.load(x + " + std::string(addr ? "addr" : "base + " + OffExpr(g)) + ", mask=m, other=" + other + ")\n";
    return "        offs = " + std::string(addr ? "addr" : "base + " + OffExpr(g)) + "\n" + pro->load(other);
  };
  const std::string neutral_other = op.kind == "amax" || op.kind == "argmax"   ? "float('-inf')"
                                    : op.kind == "amin" || op.kind == "argmin" ? "float('inf')"
                                    : op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp"
                                        ? "float('-inf')"
                                    : op.kind == "cumprod" ? "1.0"
                                                           : "0.0";
  kv["LOADV"] = load(neutral_other, false);
  if (cs.coop > 0) {
    const int64_t ks = CeilDiv(g.R, cs.block_r);
    kv["CCHUNK"] = I(cs.block_r);
    kv["KS"] = I(ks);
    kv["KP"] = I(std::max<int64_t>(2, Pow2Ceil(ks)));
    kv["CW"] = I(cs.warps);
    kv["PER_SM"] = I(cs.coop);
    kv["LOADC"] = Indent4(load(neutral_other, true));
  }
  kv["LOADV0"] = load("0.0", true);
  std::ostringstream o;
  // Rows that are consecutive addresses within outer blocks of RD (and more
  // than one block): each program takes BLOCK_M rows of one block, so the
  // address is affine in the lane (Triton then reads along the rows) and no
  // lane strays into the next block.
  const bool blocked = RowsContiguous(g) && g.RD < g.rows && op.kind != "maxpool" && op.kind != "avgpool";
  kv["GRID0"] = blocked ? I(CeilDiv(g.rows, g.RD) * CeilDiv(g.RD, s.block_m)) : "triton.cdiv(" + I(g.rows) + ", " + I(s.block_m) + ")";
  kv["RD"] = I(g.RD);
  kv["NB"] = I(CeilDiv(g.RD, s.block_m));
  kv["S1"] = I(g.S1);
  const std::string head = RowHead(blocked);
  if (op.kind == "xent") {
    // Per program BLOCK_M rows: each row's logsumexp (one tile, or online
    // over tiles) minus x at the row's target (gathered; a prologue is
    // computed at that element), zero where the target is ignored; the
    // program's loss sum and kept-row count go to part, and a one-program
    // kernel adds them up in order (then divides, for the mean). A target
    // outside [0, C) gives NaN where PyTorch raises.
    const int64_t np = CeilDiv(g.rows, s.block_m);
    kv["PARAMS"] = xparams + ", tgt, part, ";
    kv["NP"] = I(np);
    kv["MB"] = I(std::min<int64_t>(Pow2Ceil(np), 4096));
    kv["IGN"] = I(op.ignore_index);
    kv["FINISH"] = op.mean ? "tot_s / tot_c" : "tot_s";
    kv["LAUNCH_HEAD"] = "def _ax_red" + I(static_cast<int64_t>(k)) + "(" + xparams + ", tgt):\n" +
                        (pro ? pro->head
                             : "    assert list(x.shape) == " + PyShape(op.in_shape) +
                                   ", \"the kernel was generated for the traced shapes\"\n    x = x.contiguous()\n") +
                        "    assert list(tgt.shape) == [" + I(g.rows) +
                        "], \"the kernel was generated for the traced shapes\"\n    tgt = tgt.contiguous()\n";
    kv["PICK"] = Dedent4(pro ? pro->load("0.0") : "        v = tl.load(x + offs, mask=m, other=0.0)\n");
    kv["LOAD1"] = Dedent4(load("float('-inf')", true));
    const std::string lse = std::string(s.block_r >= g.R ? kRowInOneTile : kRowOnline) + "    lse = mx + tl.log(tot)\n";
    o << Fill(head + lse + R"(    tg = tl.load(tgt + rows, mask=rvalid, other={IGN})
    valid = rvalid & (tg != {IGN})
    inb = (tg >= 0) & (tg < {R})
    m = valid & inb
    offs = rows * {R} + tl.where(m, tg, 0)
{PICK}    loss = tl.where(valid, tl.where(inb, lse - v, float('nan')), 0.0)
    tl.store(part + tl.program_id(0), tl.sum(loss, axis=0))
    tl.store(part + {NP} + tl.program_id(0), tl.sum(valid.to(tl.float32), axis=0))


@triton.jit
def _ax_red{K}_merge(part, out, NP: tl.constexpr, MB: tl.constexpr):
    acc_s = tl.zeros([MB], tl.float32)
    acc_c = tl.zeros([MB], tl.float32)
    for i0 in range(0, NP, MB):
        i = i0 + tl.arange(0, MB)
        acc_s += tl.load(part + i, mask=i < NP, other=0.0)
        acc_c += tl.load(part + NP + i, mask=i < NP, other=0.0)
    tot_s = tl.sum(acc_s, axis=0)
    tot_c = tl.sum(acc_c, axis=0)
    tl.store(out, {FINISH})


{LAUNCH_HEAD}    part = torch.empty((2 * {NP},), device={DEV}, dtype=torch.float32)
    out = torch.empty([], device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[({GRID0},)]({XARGS}, tgt, part, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    _ax_red{K}_merge[(1,)](part, out, NP={NP}, MB={MB}, num_warps=4)
    return out


)", kv);
  } else if (op.kind == "sum" || op.kind == "mean" || op.kind == "amax" || op.kind == "amin") {
    std::string neutral = op.kind == "amax" ? "float('-inf')" : op.kind == "amin" ? "float('inf')" : "0.0";
    // max and min keep NaN, as PyTorch's amax/amin do (the GPU's max/min
    // instructions, and so tl.max and tl.maximum by default, drop it).
    std::string combine = op.kind == "amax"   ? std::string("tl.maximum(acc, v") + kNanArg
                          : op.kind == "amin" ? std::string("tl.minimum(acc, v") + kNanArg
                                              : "acc + v";
    std::string reduce = op.kind == "amax" ? "_ax_nanmax" : op.kind == "amin" ? "_ax_nanmin" : "tl.sum";
    std::string post = op.kind == "mean" && s.split == 1 ? " / " + PyFloat(static_cast<double>(g.R)) : "";
    std::string merge = op.kind == "amax" ? "part.amax(0)" : op.kind == "amin" ? "part.amin(0)" : "part.sum(0)";
    if (op.kind == "mean") merge += " / " + PyFloat(static_cast<double>(g.R));
    kv["PARAMS"] = xparams + ", out, ";
    kv["NEUTRAL"] = neutral;
    kv["COMBINE"] = combine;
    kv["REDUCE"] = reduce;
    kv["POST"] = post;
    kv["MERGE"] = s.split == 1 ? "part[0]" : merge;
    if (epi) {
      std::string eparams, outs, allocs, rets;
      for (const auto& prm : epi->params) eparams += ", " + prm;
      for (size_t i = 0; i < epi->outputs; ++i) {
        const std::string oi = "out" + std::to_string(i);
        outs += ", " + oi;
        allocs += "    " + oi + " = torch.empty(" + PyShape(op.in_shape) + ", device=" + kv["DEV"] + ", dtype=torch.float32)\n";
        rets += (i ? ", " : "") + oi;
      }
      kv["PARAMS"] = xparams + eparams + outs + ", ";
      kv["EPARAMS"] = eparams;
      kv["OUTS"] = outs;
      kv["ALLOCS"] = allocs;
      kv["RETS"] = rets;
      kv["EHEAD"] = epi->head;
      kv["ELINES"] = epi->lines;
      kv["EONCE"] = epi->once;
      kv["POST1"] = op.kind == "mean" ? " / " + PyFloat(static_cast<double>(g.R)) : "";
      if (CoopEpilogue(op, want) && !epi->coop_lines.empty()) {
        // Split-row: each program reduces its chunk (held in registers),
        // the row's programs merge their partial results, and each runs the
        // epilogue on its chunk from registers: the input is read once.
        // Defaults: chunks of 4096, 4 warps, 16 programs per SM (fewer when
        // they do not fit). H200, L1 normalisation of [32768, 65535]: 5.07 ms;
        // 2048/2/16 5.08, 4096/4/8 5.26, 8192/8/4 (the norms') 5.50,
        // 8192/8/2 5.92, 16384/16/2 7.16.
        const int64_t cchunk = want.block_r > 0 ? std::clamp<int64_t>(Pow2Ceil(want.block_r), 512, 16384) : 4096;
        const int64_t ks = CeilDiv(g.R, cchunk);
        kv["CCHUNK"] = I(cchunk);
        kv["KS"] = I(ks);
        kv["KP"] = I(std::max<int64_t>(2, Pow2Ceil(ks)));
        kv["CW"] = I(want.warps > 0 ? want.warps : 4);
        kv["PER_SM"] = I(want.coop > 0 ? std::min(want.coop, 32) : kCoopEpiloguePerSm);
        kv["LOADC"] = Indent4(load(neutral, true));
        kv["COOP_OUTS"] = (eparams + outs).substr(2) + ", ";
        kv["COOP_META"] = "";
        kv["CONSTS"] = "";
        kv["ECONCE"] = Indent4(Indent4(Indent4(epi->once)));
        kv["ECLINES"] = Indent4(Indent4(epi->coop_lines));
        o << Fill(CoopTop(false) + kCoopChunk + R"(            if PHASE != 1:
                tl.store(pa + item, {REDUCE}({REDUCE}(v, axis=1), axis=0))
                tl.atomic_add(cnt + item // KS, 1, sem='release')
)" + kCoopWaitIf + kCoopWaitBody + R"(                av = tl.load(pa + at, mask=ks < KS, other={NEUTRAL}, volatile=True)
                red2 = tl.zeros([1, 1], dtype=tl.float32) + {REDUCE}(av, axis=0){POST1}
{ECONCE}                offs = addr
{ECLINES}

{LAUNCH_HEAD}{EHEAD}{ALLOCS})" + kCoopBuffers + kCoopLaunch + R"(    return {RETS}


)", kv);
        *src += o.str();
        return Status::Ok();
      }
      o << Fill(head + R"(    acc = tl.full([BLOCK_M, BLOCK_R], {NEUTRAL}, tl.float32)
    for r0 in range(0, {R}, BLOCK_R):
        r = (r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
{LOADV}        acc = {COMBINE}
    red2 = ({REDUCE}(acc, axis=1){POST1})[:, None]
{EONCE}    # the elementwise kernel that reads it, over the same row
    for r0 in range(0, {R}, BLOCK_R):
        r = (r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
        offs = base + {OFF}
{ELINES}

{LAUNCH_HEAD}{EHEAD}{ALLOCS}    _ax_red{K}_kernel[({GRID0},)]({XARGS}{EPARAMS}{OUTS}, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return {RETS}


)", kv);
      *src += o.str();
      return Status::Ok();
    }
    o << Fill(head + R"(    lo = tl.program_id(1) * {CHUNK}
    acc = tl.full([BLOCK_M, BLOCK_R], {NEUTRAL}, tl.float32)
    for r0 in range(0, {CHUNK}, BLOCK_R):
        r = (lo + r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
{LOADV}        acc = {COMBINE}
    res = {REDUCE}(acc, axis=1){POST}
    tl.store(out + tl.program_id(1) * {ROWS} + rows, res, mask=rvalid)


{LAUNCH_HEAD}    part = torch.empty(({SPLIT}, {ROWS}), device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[({GRID0}, {SPLIT})]({XARGS}, part, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return ({MERGE}).reshape({OUT_SHAPE})


)", kv);
  } else if (op.kind == "argmax" || op.kind == "argmin") {
    // Per lane the first best element (strictly better replaces, so the lane
    // keeps its first occurrence); across lanes the lowest index of the best
    // value. NaN counts as the best (as in PyTorch), its first index wins.
    kv["PARAMS"] = xparams + ", out, ";
    kv["NEUTRAL"] = op.kind == "argmax" ? "float('-inf')" : "float('inf')";
    kv["BETTER"] = op.kind == "argmax" ? "v > best" : "v < best";
    kv["TOP"] = op.kind == "argmax" ? "tl.max" : "tl.min";
    o << Fill(head + R"(    best = tl.full([BLOCK_M, BLOCK_R], {NEUTRAL}, tl.float32)
    bidx = tl.zeros([BLOCK_M, BLOCK_R], tl.int32) + (tl.arange(0, BLOCK_R)[None, :]){CAST}
    for r0 in range(0, {R}, BLOCK_R):
        r = (r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
{LOADV}        take = ({BETTER}) | ((v != v) & (best == best))
        best = tl.where(take, v, best)
        bidx = tl.where(take, r, bidx)
    nan = best != best
    top = {TOP}(tl.where(nan, {NEUTRAL}, best), axis=1)
    first_top = tl.min(tl.where((best == top[:, None]) & (bidx < {R}), bidx, {R}), axis=1)
    first_nan = tl.min(tl.where(nan & (bidx < {R}), bidx, {R}), axis=1)
    res = tl.where(first_nan < {R}, first_nan, first_top)
    tl.store(out + rows, res.to(tl.int64), mask=rvalid)


{LAUNCH_HEAD}    out = torch.empty(({ROWS},), device={DEV}, dtype=torch.int64)
    _ax_red{K}_kernel[({GRID0},)]({XARGS}, out, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return out.reshape({OUT_SHAPE})


)", kv);
  } else if (cs.coop > 0 && (op.kind == "softmax" || op.kind == "log_softmax")) {
    // Chunk partials: the chunk's maximum and the sum of exp(v - maximum).
    kv["PARAMS"] = xparams + ", out, ";
    kv["COOP_OUTS"] = "out, ";
    kv["COOP_META"] = "";
    kv["CONSTS"] = "";
    kv["YC"] = op.kind == "softmax" ? "tl.exp(v - safe) / tot" : "v - (safe + tl.log(tot))";
    o << Fill(CoopTop(false) + kCoopChunk + R"(            if PHASE != 1:
                A = tl.max(tl.max(v, axis=1), axis=0)
                e = tl.exp(v - tl.where(A == float('-inf'), 0.0, A))
                tl.store(pa + item, A)
                tl.store(pb + item, tl.sum(tl.sum(e, axis=1), axis=0))
                tl.atomic_add(cnt + item // KS, 1, sem='release')
)" + kCoopWaitIf + kCoopWaitBody + R"(                av = tl.load(pa + at, mask=ks < KS, other=float('-inf'), volatile=True)
                bv = tl.load(pb + at, mask=ks < KS, other=0.0, volatile=True)
                mx = tl.max(av, axis=0)
                safe = tl.where(mx == float('-inf'), 0.0, mx)
                tot = tl.sum(bv * tl.exp(av - safe), axis=0)
                tl.store(out + addr, {YC}, mask=m)


{LAUNCH_HEAD}    out = torch.empty({IN_SHAPE}, device={DEV}, dtype=torch.float32)
)" + kCoopBuffers + kCoopLaunch + R"(    return out


)", kv);
  } else if ((op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp") && s.block_r >= g.R) {
    // One pass: the row stays in registers, its maximum first, then one
    // exponential per element (H200, logsumexp over [32768, 4096]: 0.20 ms
    // online in two tiles, 0.14 ms here). A row of -inf gives -inf
    // (logsumexp) or NaN (softmax, log_softmax), as in PyTorch.
    kv["PARAMS"] = xparams + ", out, ";
    kv["LOAD1"] = Dedent4(load("float('-inf')", true));
    std::string body = head + kRowInOneTile;
    if (op.kind == "logsumexp") {
      body += std::string("    tl.store(out + rows, mx + tl.log(tot), mask=rvalid)\n\n\n") + kRowLauncher;
    } else {
      body += std::string("    tl.store(out + addr, ") +
              (op.kind == "softmax" ? "e / tot[:, None]" : "v - (safe + tl.log(tot)[:, None])") + ", mask=m)\n\n\n" +
              kSameShapeLauncher;
    }
    o << Fill(body, kv);
  } else if (op.kind == "softmax" || op.kind == "log_softmax" || op.kind == "logsumexp") {
    kv["PARAMS"] = xparams + ", out, ";
    std::string body = head + kRowOnline;
    if (op.kind == "logsumexp") {
      body += std::string("    tl.store(out + rows, mx + tl.log(tot), mask=rvalid)\n\n\n") + kRowLauncher;
    } else {
      body += op.kind == "softmax" ? "    mx2 = mx[:, None]\n    inv = 1.0 / tot[:, None]\n"
                                   : "    lt = mx[:, None] + tl.log(tot)[:, None]\n";
      body += std::string(R"(    for r0 in range(0, {R}, BLOCK_R):
        r = (r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
        addr = base + {OFF}
{LOADV0}        tl.store(out + addr, {Y}, mask=m)


)") + kSameShapeLauncher;
      kv["Y"] = op.kind == "softmax" ? "tl.exp(v - mx2) * inv" : "v - lt";
    }
    o << Fill(body, kv);
  } else if (op.kind == "cumsum" || op.kind == "cumprod") {
    // Inclusive scan along the row, tile by tile: the scan of a tile plus
    // (times) the running total of the tiles before it, which is the last
    // column of the previous tile's result (padding lanes hold the neutral
    // element, so it is the whole tile's).
    const bool prod = op.kind == "cumprod";
    kv["PARAMS"] = xparams + ", out, ";
    kv["NEUTRAL"] = prod ? "1.0" : "0.0";
    const std::string rev = op.reverse ? ", reverse=True" : "";
    kv["SCAN"] = prod ? "tl.cumprod(v, axis=1" + rev + ") * carry[:, None]" : "tl.cumsum(v, axis=1" + rev + ") + carry[:, None]";
    kv["LOADS"] = load(prod ? "1.0" : "0.0", true);
    // Reversed: the tiles from the last, each scanned from its end; the
    // running total is the first column of the tile after it (padding lanes,
    // at the row's end, hold the neutral element).
    kv["TILES"] = op.reverse ? "    for i in range(0, " + I(CeilDiv(g.R, s.block_r)) + "):\n        r0 = (" +
                                   I(CeilDiv(g.R, s.block_r) - 1) + " - i) * BLOCK_R\n"
                             : "    for r0 in range(0, " + I(g.R) + ", BLOCK_R):\n";
    kv["CARRY_AT"] = op.reverse ? "r0" : "r0 + BLOCK_R - 1";
    o << Fill(head + R"(    carry = tl.full([BLOCK_M], {NEUTRAL}, tl.float32)
{TILES}        r = (r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
        addr = base + {OFF}
{LOADS}        c = {SCAN}
        tl.store(out + addr, c, mask=m)
        carry = tl.sum(tl.where(r == {CARRY_AT}, c, 0.0), axis=1)


{LAUNCH_HEAD}    out = torch.empty({IN_SHAPE}, device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[({GRID0},)]({XARGS}, out, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    return out


)", kv);
  } else if (op.kind == "maxpool" || op.kind == "avgpool") {
    const size_t d = op.pool_k.size();
    int64_t in_numel = 1;
    for (auto v : op.in_shape) in_numel *= v;
    const bool wide = in_numel >= (int64_t{1} << 31) - (int64_t{1} << 20);
    const bool is_max = op.kind == "maxpool";
    std::vector<int64_t> dil = op.pool_d;
    dil.resize(d, 1);
    std::string k = op.pool_adaptive ? "    # adaptive " + op.kind + " (widest window " + PyShape(op.pool_k) + "): " +
                                           PyShape(op.in_shape) + " -> " + PyShape(op.out_shape) + "\n"
                                     : "    # " + op.kind + " kernel " + PyShape(op.pool_k) + " stride " + PyShape(op.pool_s) + " padding " +
                    PyShape(op.pool_p) + " dilation " + PyShape(dil) + ": " + PyShape(op.in_shape) + " -> " +
                    PyShape(op.out_shape) + "\n";
    k += "    o = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))" + std::string(wide ? ".to(tl.int64)" : "") + "\n";
    k += "    omask = o < " + I(g.rows) + "\n";
    // unravel the output index: o = ((nc * O0 + o0) * O1 + o1) * O2 + o2
    k += "    t = o\n";
    for (size_t i = d; i-- > 0;) {
      k += "    q" + I(static_cast<int64_t>(i)) + " = t % " + I(op.out_shape[i + 2]) + "\n";
      k += "    t = t // " + I(op.out_shape[i + 2]) + "\n";
    }
    int64_t spatial = 1;
    for (size_t i = 0; i < d; ++i) spatial *= op.in_shape[i + 2];
    k += "    nc_base = t * " + I(spatial) + "\n";
    int64_t vol = 1;
    for (auto v : op.pool_k) vol *= v;
    k += std::string("    acc = tl.full([BLOCK_M], ") + (is_max ? "float('-inf')" : "0.0") + ", tl.float32)\n";
    if (!is_max && !op.count_include_pad) k += "    cnt = tl.zeros([BLOCK_M], dtype=tl.float32)\n";
    k += "    for kk in range(" + I(vol) + "):\n";
    std::string inside = "omask", offs = "nc_base";
    int64_t stride_in = spatial, kdiv = vol;
    for (size_t i = 0; i < d; ++i) {
      const std::string si = I(static_cast<int64_t>(i));
      kdiv /= op.pool_k[i];
      stride_in /= op.in_shape[i + 2];
      k += "        w" + si + " = (kk // " + I(kdiv) + ") % " + I(op.pool_k[i]) + "\n";
      if (op.pool_adaptive) {
        // the window of output q: [q * L // O, ceil((q + 1) * L / O))
        const std::string L = I(op.in_shape[i + 2]), O = I(op.out_shape[i + 2]);
        k += "        i" + si + " = (q" + si + " * " + L + ") // " + O + " + w" + si + "\n";
        inside += " & (i" + si + " < ((q" + si + " + 1) * " + L + " + " + I(op.out_shape[i + 2] - 1) + ") // " + O + ")";
        offs += " + i" + si + (stride_in == 1 ? "" : " * " + I(stride_in));
        continue;
      }
      k += "        i" + si + " = q" + si + " * " + I(op.pool_s[i]) + " - " + I(op.pool_p[i]) + " + w" + si +
           (dil[i] == 1 ? "" : " * " + I(dil[i])) + "\n";
      inside += " & (i" + si + " >= 0) & (i" + si + " < " + I(op.in_shape[i + 2]) + ")";
      offs += " + i" + si + (stride_in == 1 ? "" : " * " + I(stride_in));
    }
    k += "        m = " + inside + "\n";
    k += "        offs = " + offs + "\n";
    const std::string other = is_max ? "float('-inf')" : "0.0";
    k += pro ? pro->load(other) : "        v = tl.load(x + offs, mask=m, other=" + other + ")\n";
    if (is_max) {
      k += "        acc = tl.where((v > acc) | (v != v), v, acc)  # NaN propagates, as in PyTorch\n";
    } else {
      k += "        acc = acc + v\n";
      if (!op.count_include_pad) k += "        cnt = cnt + m.to(tl.float32)\n";
    }
    if (!is_max && op.count_include_pad && op.pool_ceil) {
      // A window that runs past the padded input (ceil_mode) counts only its
      // part inside it, padding included, as PyTorch does.
      k += "    den = tl.full([BLOCK_M], 1.0, tl.float32)\n";
      for (size_t i = 0; i < d; ++i) {
        const std::string si = I(static_cast<int64_t>(i));
        const std::string start = "(q" + si + " * " + I(op.pool_s[i]) + " - " + I(op.pool_p[i]) + ")";
        k += "    den = den * (tl.minimum(" + start + " + " + I(op.pool_k[i]) + ", " +
             I(op.in_shape[i + 2] + op.pool_p[i]) + ") - " + start + ").to(tl.float32)\n";
      }
      k += "    acc = acc / den\n";
    } else if (!is_max) {
      k += op.count_include_pad ? "    acc = acc / " + PyFloat(static_cast<double>(vol)) + "\n" : "    acc = acc / cnt\n";
    }
    k += "    tl.store(out + o, acc, mask=omask)\n";
    kv["PARAMS"] = xparams + ", out, ";
    kv["KBODY"] = k;
    o << Fill(R"(@triton.jit
def _ax_red{K}_kernel({PARAMS}BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):
{KBODY}

{LAUNCH_HEAD}    out = torch.empty({OUT_SHAPE}, device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[(triton.cdiv({ROWS}, {BM}),)]({XARGS}, out, BLOCK_M={BM}, BLOCK_R=1, num_warps={W})
    return out


)", kv);
  } else if (op.kind == "norm") {
    // Statistics: shifted sums (by the row's first element) for a stable
    // variance in one read; partial sums per split, merged by the launcher.
    kv["PARAMS"] = xparams + ", p1, p2, shift, ";
    std::string apply = NormApplyLines(op, "");
    // The row-by-row apply (by_rows below): the weight and bias of a
    // position are loaded once per program, the row's mean and 1/std once per
    // row (H200, 16 rows of 4M: 0.175 -> 0.166 ms).
    std::string rows_apply = "    v = tl.load(x + offs, mask=mask, other=0.0)\n"
                             "    rs = 1.0 / tl.sqrt(tl.load(var + rr) + " + PyFloat(op.eps) + ")\n"
                             "    y = (v - tl.load(mean + rr)) * rs * wv\n"
                             "    if HAS_B:\n        y = y + bv\n";
    if (pro) {
      // The prologue stands in for every read of x: the shift (the row's
      // first element), the statistics loop and the apply kernel.
      const std::string xload = "    v = tl.load(x + offs, mask=mask, other=0.0)\n";
      const size_t at = apply.find(xload);
      if (at == std::string::npos) return Status::Error("norm apply lines changed");
      apply.replace(at, xload.size(), "    m = mask\n" + Dedent4(pro->load("0.0")));
      rows_apply.replace(0, xload.size(), "    m = mask\n" + Dedent4(pro->load("0.0")));
      // The row's first element, through tiles of the loop's shape (Triton
      // needs m, offs, v and the prologue's values to keep their types
      // across the loop below): only column 0 is read.
      kv["K0"] = "    m = rmask & (tl.arange(0, BLOCK_R)[None, :] < 1)\n    offs = base + (tl.arange(0, BLOCK_R)[None, :] * 0)" +
                 kv["CAST"] + "\n" + Dedent4(pro->load("0.0")) + "    k0 = tl.sum(v, axis=1)[:, None]\n";
      kv["NORM_HEAD"] = pro->head;
      kv["XRET"] = "None";
      kv["WB"] = pro->tensor;
    } else {
      kv["K0"] = "    k0 = tl.load(x + base, mask=rmask, other=0.0)\n";
      kv["NORM_HEAD"] = "    assert list(x.shape) == " + PyShape(op.in_shape) +
                        ", \"the kernel was generated for the traced shapes\"\n    x = x.contiguous()\n";
      kv["XRET"] = "x";
      kv["WB"] = "x";
    }
    kv["APPLY"] = apply;
    // The partials' merge: one launch (a tile of MBS partials x MRW rows per
    // step) instead of about eight PyTorch operations, each with its launch.
    {
      int64_t mrw = 1, mbs = 1;
      while (mrw < g.rows && mrw < 128) mrw *= 2;
      while (mbs < s.split && mbs * mrw < 4096) mbs *= 2;
      kv["MRW"] = I(mrw);
      kv["MBS"] = I(mbs);
      kv["MGRID"] = I(CeilDiv(g.rows, mrw));
    }
    kv["XLHS"] = pro ? "_" : "x";
    kv["LOADN"] = load("0.0", false);
    kv["MOD"] = op.module.empty() ? "None" : "mod";
    const int ablock = 1024;
    kv["AB"] = I(ablock);
    // Few long rows with a weight per position of the row (a layer norm over
    // large trailing dims): the apply walks the rows (below), not the flat tensor.
    const bool by_rows = cs.coop <= 0 && !(s.split == 1 && s.block_r >= g.R) && op.affine && op.ch_div == 1 && op.ch_mod == g.R &&
                         op.row_div == g.R && g.rows <= 64 && g.R >= (int64_t{1} << 16);
    kv["FLAT_APPLY"] = by_rows || cs.coop > 0 ? "" : Fill(R"(@triton.jit
def _ax_red{K}_apply({XARGS}, out, mean, var, w, b, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    # ({KIND}) y = (x - mean[row]) / sqrt(var[row] + eps) * weight[c] + bias[c]
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)){CAST}
    mask = offs < {NUMEL}
{APPLY}    tl.store(out + offs, y, mask=mask)


)", kv);
    o << Fill(head + R"({K0}    lo = tl.program_id(1) * {CHUNK}
    a1 = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    a2 = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    for r0 in range(0, {CHUNK}, BLOCK_R):
        r = (lo + r0 + tl.arange(0, BLOCK_R)[None, :]){CAST}
        m = rmask & (r < {R})
{LOADN}        d = tl.where(m, v - k0, 0.0)
        a1 += d
        a2 += d * d
    rm = rvalid
    tl.store(p1 + tl.program_id(1) * {ROWS} + rows, tl.sum(a1, axis=1), mask=rm)
    tl.store(p2 + tl.program_id(1) * {ROWS} + rows, tl.sum(a2, axis=1), mask=rm)
    if tl.program_id(1) == 0:
        tl.store(shift + rows, tl.sum(k0, axis=1), mask=rm)


@triton.jit
def _ax_red{K}_merge(p1, p2, shift, mean, var):
    # the rows' mean and biased variance from the {SPLIT} column partials
    rows = tl.program_id(0) * {MRW} + tl.arange(0, {MRW})
    rm = rows < {ROWS}
    a1 = tl.zeros([{MRW}], dtype=tl.float32)
    a2 = tl.zeros([{MRW}], dtype=tl.float32)
    for s0 in range(0, {SPLIT}, {MBS}):
        sp = s0 + tl.arange(0, {MBS})[:, None]
        m = (sp < {SPLIT}) & rm[None, :]
        a1 += tl.sum(tl.load(p1 + sp * {ROWS} + rows[None, :], mask=m, other=0.0), axis=0)
        a2 += tl.sum(tl.load(p2 + sp * {ROWS} + rows[None, :], mask=m, other=0.0), axis=0)
    md = a1 / {R}.0
    tl.store(mean + rows, tl.load(shift + rows, mask=rm, other=0.0) + md, mask=rm)
    tl.store(var + rows, tl.maximum(a2 / {R}.0 - md * md, 0.0), mask=rm)


{FLAT_APPLY}def _ax_red{K}_stats({XARGS}, mod):
    """x made contiguous (None with a prologue), its per-row mean and biased
    variance, and the affine parameters for an apply kernel (a tensor argument
    stands in for a missing one; has_b)."""
{NORM_HEAD}    p1 = torch.empty(({SPLIT}, {ROWS}), device={DEV}, dtype=torch.float32)
    p2 = torch.empty(({SPLIT}, {ROWS}), device={DEV}, dtype=torch.float32)
    shift = torch.empty(({ROWS},), device={DEV}, dtype=torch.float32)
    _ax_red{K}_kernel[({GRID0}, {SPLIT})]({XARGS}, p1, p2, shift, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
    mean = torch.empty(({ROWS},), device={DEV}, dtype=torch.float32)
    var = torch.empty(({ROWS},), device={DEV}, dtype=torch.float32)
    _ax_red{K}_merge[({MGRID},)](p1, p2, shift, mean, var, num_warps=4)
)", kv);
    const std::string running = op.running_stats ? Fill(R"(    if mod.training and mod.track_running_stats:
        with torch.no_grad():
            mod.num_batches_tracked.add_(1)
            f = (1.0 / float(mod.num_batches_tracked)) if mod.momentum is None else mod.momentum
            mod.running_mean.mul_(1.0 - f).add_(mean, alpha=f)
            mod.running_var.mul_(1.0 - f).add_(var, alpha=f * {R} / max({R} - 1, 1))
)", kv) : "";
    o << running;
    o << Fill(R"(    w = mod.weight if getattr(mod, "weight", None) is not None else {WB}
    b = mod.bias if getattr(mod, "bias", None) is not None else {WB}
    return {XRET}, mean, var, w, b, getattr(mod, "bias", None) is not None


)", kv);
    std::string aff;
    if (op.affine) {
      std::string ch = "(addr // " + I(op.ch_div) + ") % " + I(op.ch_mod);
      if (op.ch_div == 1) ch = "addr % " + I(op.ch_mod);
      aff = "    c = " + ch + "\n    y = y * tl.load(w + c, mask=m, other=0.0)\n"
            "    if HAS_B:\n        y = y + tl.load(b + c, mask=m, other=0.0)\n";
    }
    kv["EPS"] = PyFloat(op.eps);
    kv["RUNNING"] = running;
    if (cs.coop > 0) {
      // Chunk partials: the chunk's sum and its sum of squared deviations from
      // the chunk's mean (exact, from registers), merged per row by Chan's
      // formula; the chunk of item i holds min(CHUNK, R - i * CHUNK) elements.
      kv["PARAMS"] = xparams + ", out, mean_out, var_out, w, b, ";
      kv["CONSTS"] = ", HAS_B: tl.constexpr";
      kv["COOP_OUTS"] = "out, mean, var, w, b, ";
      kv["COOP_META"] = "HAS_B=getattr(mod, \"bias\", None) is not None, ";
      // A chunk that lies within one channel (channels a whole number of
      // chunks, rows a whole number of channels, each row one run of
      // addresses) loads its weight and bias once, not per element: group
      // norm over [896, 2097152] on an H200, 4.27 ms of GPU time against 4.60
      // (2026-12-02, the held-a-round form).
      std::string affc = aff;
      const bool one_run = (g.IN == 1 && g.S3 == 1) || g.IN >= g.R;
      const int64_t row_step = g.RD == 1 ? g.S1 : g.RD >= g.rows ? g.S2 : 0;
      if (op.affine && op.ch_div > 1 && op.ch_div % cs.block_r == 0 && one_run && row_step > 0 &&
          row_step % op.ch_div == 0) {
        affc = "    c = ((base + (item % KS) * CHUNK) // " + I(op.ch_div) + ") % " + I(op.ch_mod) +
               "  # the chunk's channel\n    y = y * tl.load(w + c)\n    if HAS_B:\n        y = y + tl.load(b + c)\n";
      }
      kv["AFFC"] = Indent4(Indent4(Indent4(affc)));
      kv["VAL"] = "v";  // the chunk the apply normalises
      const std::string stats = R"(            if PHASE != 1:
                v0 = tl.where(m, v, 0.0)
                n_i = tl.minimum({R} - (item % KS) * CHUNK, CHUNK).to(tl.float32)
                cs = tl.sum(tl.sum(v0, axis=1), axis=0)
                d = tl.where(m, v - cs / n_i, 0.0)
                tl.store(pa + item, cs)
                tl.store(pb + item, tl.sum(tl.sum(d * d, axis=1), axis=0))
                tl.atomic_add(cnt + item // KS, 1, sem='release')
)";
      const std::string apply = std::string(kCoopWaitBody) + R"(                sv = tl.load(pa + at, mask=ks < KS, other=0.0, volatile=True)
                qv = tl.load(pb + at, mask=ks < KS, other=0.0, volatile=True)
                nv = tl.where(ks < KS, tl.minimum({R} - ks * CHUNK, CHUNK), 0).to(tl.float32)
                mu = tl.sum(sv, axis=0) / {R}.0
                dm = tl.where(ks < KS, sv / tl.maximum(nv, 1.0) - mu, 0.0)
                va = tl.sum(qv + nv * dm * dm, axis=0) / {R}.0
                y = ({VAL} - mu) / tl.sqrt(va + {EPS})
{AFFC}                tl.store(out + addr, y, mask=m)
                if item % KS == 0:
                    tl.store(mean_out + item // KS, mu)
                    tl.store(var_out + item // KS, va)
)";
      std::string kernel;
      if (cs.lag == 2) {
        // Held a round: each item's chunk is read with a mask (past the last
        // item it reads nothing), and the chunk of a round earlier, still in
        // registers as prev, is applied once its row is complete.
        const std::string head = Fill(CoopTop(false, true), kv);
        auto kp = kv;
        kp["VAL"] = "prev";
        const std::string apply_prev = Fill(apply, kp);
        kernel = head + Dedent4(Fill(kCoopChunk, kv)) + "        cur = v.to(tl.float32)\n        if item < " + kv["ROWS"] +
                 " * KS:\n" + Fill(stats, kv) + kCoopLagWaitIf + Fill(apply, kv) + Fill(kCoopHeldSecond, kv) +
                 Indent4(Fill(kCoopAddr, kv)) + WithKwarg(apply_prev, "tl.store(out + addr", "cache_modifier='.cs'") +
                 "        prev = cur\n";
        kv["COOP_META"] += "lag=2, ";
      } else if (cs.lag > 0) {
        const std::string chunk = Fill(kCoopChunk, kv);
        kernel = Fill(CoopTop(true), kv) + WithKwarg(chunk, "tl.load(", "eviction_policy='evict_last'") + Fill(stats, kv) +
                 kCoopLagWaitIf + Fill(apply, kv) + Fill(kCoopLagSecond, kv) +
                 Indent4(WithKwarg(chunk, "tl.load(", "eviction_policy='evict_first'")) +
                 WithKwarg(Fill(apply, kv), "tl.store(out + addr", "cache_modifier='.cs'");
        kv["COOP_META"] += "lag=True, ";
      } else {
        kernel = Fill(CoopTop(false) + kCoopChunk + stats + kCoopWaitIf + apply, kv);
      }
      o << kernel << "\n\n" << Fill(std::string(kNormLaunchHead) + kCoopBuffers + kCoopLaunch + R"({RUNNING}    return out


)", kv);
    } else if (s.split == 1 && s.block_r >= g.R) {
      // One pass: the row stays in registers between its statistics (exact
      // two-pass variance over the registers) and its apply.
      kv["AFF"] = aff;
      kv["LOAD1"] = Dedent4(load("0.0", true));
      kv["PARAMS"] = xparams + ", out, mean_out, var_out, w, b, HAS_B: tl.constexpr, ";
      std::string head1 = head;
      head1.replace(head1.find("_kernel("), 8, "_kernel_one(");
      o << Fill(head1 + R"(    r = tl.arange(0, BLOCK_R)[None, :]{CAST}
    m = rmask & (r < {R})
    addr = base + {OFF}
{LOAD1}    v = tl.where(m, v, 0.0)
    mu = tl.sum(v, axis=1) / {R}.0
    d = tl.where(m, v - mu[:, None], 0.0)
    va = tl.sum(d * d, axis=1) / {R}.0
    y = d / tl.sqrt(va[:, None] + {EPS})
{AFF}    tl.store(out + addr, y, mask=m)
    tl.store(mean_out + rows, mu, mask=rvalid)
    tl.store(var_out + rows, va, mask=rvalid)


)" + kNormLaunchHead + R"(    _ax_red{K}_kernel_one[({GRID0},)]({XARGS}, out, mean, var, w, b, HAS_B=getattr(mod, "bias", None) is not None, BLOCK_M={BM}, BLOCK_R={BR}, num_warps={W})
{RUNNING}    return out


)", kv);
    } else if (by_rows) {
      // Each program takes a chunk of positions through every row, so its
      // weights come from DRAM once, not once per row.
      o << Fill(R"(@triton.jit
def _ax_red{K}_apply_rows({XARGS}, out, mean, var, w, b, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    # ({KIND}) y = (x - mean[row]) / sqrt(var[row] + eps) * weight[c] + bias[c], row by row
    f = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)){CAST}
    mask = f < {R}
    wv = tl.load(w + f, mask=mask, other=0.0)
    if HAS_B:
        bv = tl.load(b + f, mask=mask, other=0.0)
    for rr in range(0, {ROWS}):
        offs = rr * {R} + f
{APPLY_IN}        tl.store(out + offs, y, mask=mask)


def _ax_red{K}({XARGS}, mod):
    {XLHS}, mean, var, w, b, has_b = _ax_red{K}_stats({XARGS}, mod)
    out = torch.empty({IN_SHAPE}, device={DEV}, dtype=torch.float32)
    _ax_red{K}_apply_rows[(triton.cdiv({R}, {AB}),)]({XARGS}, out, mean, var, w, b, HAS_B=has_b, BLOCK={AB}, num_warps=4)
    return out


)", [&] {
        auto k2 = kv;
        k2["APPLY_IN"] = Indent4(rows_apply);
        return k2;
      }());
    } else {
      o << Fill(R"(def _ax_red{K}({XARGS}, mod):
    {XLHS}, mean, var, w, b, has_b = _ax_red{K}_stats({XARGS}, mod)
    out = torch.empty({IN_SHAPE}, device={DEV}, dtype=torch.float32)
    _ax_red{K}_apply[(triton.cdiv({NUMEL}, {AB}),)]({XARGS}, out, mean, var, w, b, HAS_B=has_b, BLOCK={AB}, num_warps=4)
    return out


)", kv);
    }
  } else {
    return Status::Error("no template for reduction " + op.kind);
  }
  *src += o.str();
  return Status::Ok();
}

}  // namespace ax::builtin
