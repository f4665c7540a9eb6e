#include "builtin/rownorm.h"

#include <algorithm>
#include <cstdio>

#include "builtin/ewgen.h"
#include "builtin/pywriter.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

const std::string kF16 = "torch.float16", kBF16 = "torch.bfloat16";

// Registers a program may spend on the row's values: the largest tile (in
// elements) the whole-row strategies hold at once.
constexpr int64_t kMaxTile = 32768;

// torch.finfo(dtype).eps: what rms_norm uses when eps is None.
double DtypeEps(const std::string& dtype) {
  if (dtype == kF16) return 0.0009765625;
  if (dtype == kBF16) return 0.0078125;
  return 1.1920928955078125e-07;
}

// An argument that is absent or None.
bool IsNoneArg(const json* a) {
  json v;
  return !a || a->is_null() || (PlainArg(*a, &v) && v.is_null());
}

// An int, or a tuple or list of ints (a normalized_shape), as the trace writes them.
bool IntList(const json* a, std::vector<int64_t>* out) {
  json v;
  if (!a || !PlainArg(*a, &v)) return false;
  if (v.is_number_integer()) v = json::array({v});
  if (!v.is_array() || v.empty()) return false;
  for (const auto& x : v) {
    if (!x.is_number_integer()) return false;
    out->push_back(x.get<int64_t>());
  }
  return true;
}

int64_t NextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

bool Pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The largest power of two <= cap that divides h (1 if h is odd).
int64_t Pow2Divisor(int64_t h, int64_t cap) {
  int64_t d = 1;
  while (d * 2 <= cap && h % (d * 2) == 0) d *= 2;
  return d;
}

int ClampWarps(int64_t w) { return static_cast<int>(std::clamp<int64_t>(NextPow2(std::max<int64_t>(w, 1)), 1, 16)); }

std::string F(double v) { return PyFloat(v); }

// (2, 3) or (5,): a shape as Python's tuple() of it prints.
std::string PyTupleShape(const std::vector<int64_t>& shape) {
  std::string r = "(";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + (shape.size() == 1 ? ",)" : ")");
}
std::string I(int64_t v) { return std::to_string(v); }

}  // namespace

const char* RowNormStrategyName(RowNormStrategy s) {
  switch (s) {
    case RowNormStrategy::kMultiRow: return "rows";
    case RowNormStrategy::kSplitRow: return "split";
    case RowNormStrategy::kWholeRow: break;
  }
  return "whole";
}

json RowNormSchedule::ToJson() const { return {RowNormStrategyName(strategy), rows, block, warps, stages}; }

Status RowNormSchedule::FromJson(const json& j, RowNormSchedule* out) {
  if (!j.is_array() || j.size() != 5 || !j[0].is_string()) return Status::Error("plan has a bad row-norm schedule");
  RowNormSchedule s;
  const std::string name = j[0].get<std::string>();
  if (name == "whole") {
    s.strategy = RowNormStrategy::kWholeRow;
  } else if (name == "rows") {
    s.strategy = RowNormStrategy::kMultiRow;
  } else if (name == "split") {
    s.strategy = RowNormStrategy::kSplitRow;
  } else {
    return Status::Error("plan has an unknown row-norm strategy '" + name + "'");
  }
  for (size_t i = 1; i < 5; ++i) {
    if (!j[i].is_number_integer()) return Status::Error("plan has a bad row-norm schedule");
  }
  s.rows = j[1].get<int>();
  s.block = j[2].get<int>();
  s.warps = j[3].get<int>();
  s.stages = j[4].get<int>();
  if (!Pow2(s.rows) || s.rows > 256 || !Pow2(s.block) || s.block > kMaxTile || !Pow2(s.warps) || s.warps > 16 ||
      s.stages < 1 || s.stages > 4) {
    return Status::Error("plan has a bad row-norm schedule");
  }
  *out = s;
  return Status::Ok();
}

bool RowNormSchedule::ValidFor(const RowNormOp& op) const {
  if (!Pow2(rows) || !Pow2(block) || !Pow2(warps) || warps > 16 || stages < 1 || stages > 4) return false;
  const int64_t tile = static_cast<int64_t>(rows) * block;
  // at least one element per thread, and no more than the register budget
  if (tile < 32LL * warps || tile > kMaxTile) return false;
  switch (strategy) {
    case RowNormStrategy::kWholeRow:
      return rows == 1 && block == NextPow2(op.H) && stages == 1;
    case RowNormStrategy::kMultiRow:
      return rows >= 2 && rows <= NextPow2(op.rows) && block == NextPow2(op.H) && stages == 1;
    case RowNormStrategy::kSplitRow:
      return rows == 1 && block >= 64 && block < op.H;
  }
  return false;
}

std::string RowNormSchedule::Describe() const {
  std::string s;
  switch (strategy) {
    case RowNormStrategy::kWholeRow: s = "whole row in registers"; break;
    case RowNormStrategy::kMultiRow: s = I(rows) + " rows per program"; break;
    case RowNormStrategy::kSplitRow: s = "split row, chunk " + I(block) + ", " + I(stages) + " stages"; break;
  }
  return s + ", " + I(warps) + " warps";
}

bool ClassifyRowNorm(const Graph& g, const Node& n, RowNormOp* out) {
  if (!n.is_tensor || !IsFloatDtype(n.dtype)) return false;
  RowNormOp op;
  std::vector<int64_t> normalized;
  const json* eps = nullptr;
  if (n.op == "call_function" && (n.callable == "torch.nn.functional.rms_norm" || n.callable == "torch.rms_norm")) {
    for (const auto& [k, v] : n.kwargs.items()) {
      if (k != "normalized_shape" && k != "weight" && k != "eps") return false;
    }
    if (n.args.size() > 4 || !IntList(n.Arg(1, "normalized_shape"), &normalized)) return false;
    const json* w = n.Arg(2, "weight");
    if (!IsNoneArg(w)) {
      if (!w->is_object() || !w->contains("node")) return false;
      const Node* wn = g.Find((*w)["node"].get<std::string>());
      if (!wn || !wn->is_tensor || wn->shape != normalized || !IsFloatDtype(wn->dtype)) return false;
      op.weight = RowNormOp::Weight::kNode;
      op.weight_ref = wn->name;
    }
    eps = n.Arg(3, "eps");
  } else if (n.op == "call_module" && n.ModuleClass() == "RMSNorm") {
    if (n.args.size() != 1 || !n.kwargs.empty()) return false;
    const json& attrs = n.module.contains("attrs") ? n.module["attrs"] : json::object();
    const json& params = n.module.contains("params") ? n.module["params"] : json::object();
    normalized = AttrOr(attrs, "normalized_shape", std::vector<int64_t>{});
    if (normalized.empty()) return false;
    if (AttrOr(attrs, "elementwise_affine", false)) {
      if (!params.contains("weight") || params["weight"].value("shape", std::vector<int64_t>{}) != normalized ||
          !IsFloatDtype(params["weight"].value("dtype", ""))) {
        return false;
      }
      op.weight = RowNormOp::Weight::kModule;
      op.weight_ref = n.target;
    }
    if (attrs.contains("eps") && attrs["eps"].is_number()) {
      op.eps = attrs["eps"].get<double>();
    } else if (attrs.contains("eps") && !attrs["eps"].is_null()) {
      return false;
    } else {
      op.eps = DtypeEps(n.dtype);
    }
  } else {
    return false;
  }
  const json* x = n.Arg(0, "input");
  if (!x || !x->is_object() || !x->contains("node")) return false;
  const Node* xn = g.Find((*x)["node"].get<std::string>());
  if (!xn || !xn->is_tensor || xn->dtype != n.dtype || xn->shape != n.shape || normalized.size() > xn->shape.size()) {
    return false;
  }
  const size_t lead = xn->shape.size() - normalized.size();
  for (size_t i = 0; i < normalized.size(); ++i) {
    if (xn->shape[lead + i] != normalized[i]) return false;
  }
  op.H = 1;
  for (int64_t d : normalized) op.H *= d;
  op.rows = 1;
  for (size_t i = 0; i < lead; ++i) op.rows *= xn->shape[i];
  if (op.H < 1 || op.rows < 1) return false;
  if (n.op == "call_function") {
    json v;
    if (IsNoneArg(eps)) {
      op.eps = DtypeEps(n.dtype);
    } else if (PlainArg(*eps, &v) && v.is_number() && !v.is_boolean()) {
      op.eps = v.get<double>();
    } else {
      return false;
    }
  }
  op.input = xn->name;
  op.out_dtype = n.dtype;
  op.shape = n.shape;
  *out = op;
  return true;
}

bool DefaultRowNormSchedule(const RowNormOp& op, RowNormStrategy s, RowNormSchedule* out) {
  RowNormSchedule r;
  r.strategy = s;
  const int64_t tile = NextPow2(op.H);
  switch (s) {
    case RowNormStrategy::kWholeRow:
      r.block = static_cast<int>(tile);
      // about 16 bytes per thread and load: 4 fp32 or 8 half values, times 4
      r.warps = ClampWarps(tile / (32 * (64 / op.ElementBytes())));
      break;
    case RowNormStrategy::kMultiRow: {
      // rows sharing a program until the tile holds about 8192 elements
      r.block = static_cast<int>(tile);
      r.rows = static_cast<int>(std::min<int64_t>({std::max<int64_t>(8192 / tile, 1), 64, NextPow2(op.rows)}));
      r.warps = ClampWarps(r.rows * tile / (32 * (64 / op.ElementBytes())));
      break;
    }
    case RowNormStrategy::kSplitRow: {
      // a chunk that divides the row (no masks) where one of 512 or more does
      int64_t c = Pow2Divisor(op.H, std::min<int64_t>(4096, op.H / 2));
      if (c < 512) c = std::min<int64_t>(2048, NextPow2(op.H) / 2);
      r.block = static_cast<int>(c);
      r.warps = ClampWarps(c / 256);
      r.stages = 2;
      break;
    }
  }
  if (!r.ValidFor(op)) return false;
  *out = r;
  return true;
}

std::vector<RowNormStrategy> RowNormStrategies(const RowNormOp& op) {
  std::vector<RowNormStrategy> order;
  const int64_t tile = NextPow2(op.H);
  // Short rows first share programs; rows up to 16384 elements stay in
  // registers; longer ones (and, as an alternative, any row) are split.
  if (tile <= 1024) order = {RowNormStrategy::kMultiRow, RowNormStrategy::kWholeRow, RowNormStrategy::kSplitRow};
  else if (tile <= 16384) order = {RowNormStrategy::kWholeRow, RowNormStrategy::kMultiRow, RowNormStrategy::kSplitRow};
  else order = {RowNormStrategy::kSplitRow, RowNormStrategy::kWholeRow, RowNormStrategy::kMultiRow};
  std::vector<RowNormStrategy> out;
  RowNormSchedule s;
  for (auto st : order) {
    if (DefaultRowNormSchedule(op, st, &s)) out.push_back(st);
  }
  return out;
}

std::vector<RowNormSchedule> RowNormNeighbours(const RowNormOp& op, const RowNormSchedule& s) {
  std::vector<RowNormSchedule> out;
  auto add = [&](RowNormSchedule c) {
    if (c.ValidFor(op) && !(c == s) && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  // knob set to each value in turn, the others as in s
  auto vary = [&](int RowNormSchedule::*knob, std::initializer_list<int> values) {
    for (int v : values) {
      RowNormSchedule c = s;
      c.*knob = v;
      add(c);
    }
  };
  const bool split = s.strategy == RowNormStrategy::kSplitRow;
  for (int f : {2, 4}) {
    vary(&RowNormSchedule::warps, {s.warps / f, s.warps * f});
    if (s.strategy == RowNormStrategy::kMultiRow) vary(&RowNormSchedule::rows, {s.rows * f, s.rows / f});
    if (split) vary(&RowNormSchedule::block, {s.block * f, s.block / f});
  }
  if (split) vary(&RowNormSchedule::stages, {s.stages + 1, s.stages - 1, s.stages + 2});
  return out;
}

namespace {

// x * rsqrt(mean(x^2) + eps), times the weight, on float32 values.
void EmitWholeRows(const RowNormOp& op, const RowNormSchedule& s, bool wide, PyWriter* w) {
  const bool row_mask = op.rows % s.rows != 0, col_mask = s.block != op.H;
  w->Line("pid = tl.program_id(0)");
  w->Line("rows = pid * " + I(s.rows) + " + tl.arange(0, " + I(s.rows) + ")");
  w->Line("cols = tl.arange(0, " + I(s.block) + ")");
  w->Line("offs = rows" + std::string(wide ? ".to(tl.int64)" : "") + "[:, None] * " + I(op.H) + " + cols[None, :]");
  std::string mask;
  if (row_mask && col_mask) {
    w->Line("mask = (rows < " + I(op.rows) + ")[:, None] & (cols < " + I(op.H) + ")[None, :]");
    mask = ", mask=mask";
  } else if (row_mask) {
    w->Line("mask = (rows < " + I(op.rows) + ")[:, None]");
    mask = ", mask=mask";
  } else if (col_mask) {
    w->Line("mask = (cols < " + I(op.H) + ")[None, :]");
    mask = ", mask=mask";
  }
  w->Line("x = tl.load(x_ptr + offs" + mask + (mask.empty() ? "" : ", other=0.0") + ").to(tl.float32)");
  w->Line("r = tl.rsqrt(tl.sum(x * x, axis=1) / " + F(static_cast<double>(op.H)) + " + " + F(op.eps) + ")");
  w->Line("y = x * r[:, None]");
  if (op.weight != RowNormOp::Weight::kNone) {
    w->Line("wt = tl.load(w_ptr + cols" + std::string(col_mask ? ", mask=cols < " + I(op.H) + ", other=0.0" : "") +
            ").to(tl.float32)");
    w->Line("y = y * wt[None, :]");
  }
  w->Line("tl.store(o_ptr + offs, y.to(o_ptr.dtype.element_ty)" + mask + ")");
}

void EmitSplitRow(const RowNormOp& op, const RowNormSchedule& s, bool wide, PyWriter* w) {
  const bool mask = op.H % s.block != 0;
  const std::string m = mask ? ", mask=c < " + I(op.H) : "";
  w->Line("row = tl.program_id(0)" + std::string(wide ? ".to(tl.int64)" : ""));
  w->Line("xr = x_ptr + row * " + I(op.H));
  w->Line("orow = o_ptr + row * " + I(op.H));
  // the chunk loop, twice: the sum of squares, then the scaling
  const std::string loop = "for start in tl.range(0, " + I(op.H) + ", " + I(s.block) + ", num_stages=" + I(s.stages) + "):";
  const std::string chunk = "c = start + tl.arange(0, " + I(s.block) + ")";
  w->Line("acc = tl.zeros([" + I(s.block) + "], dtype=tl.float32)");
  {
    auto body = w->Open(loop);
    w->Line(chunk);
    w->Line("x = tl.load(xr + c" + m + (mask ? ", other=0.0" : "") + ").to(tl.float32)");
    w->Line("acc += x * x");
  }
  w->Line("r = tl.rsqrt(tl.sum(acc, axis=0) / " + F(static_cast<double>(op.H)) + " + " + F(op.eps) + ")");
  {
    auto body = w->Open(loop);
    w->Line(chunk);
    w->Line("y = tl.load(xr + c" + m + (mask ? ", other=0.0" : "") + ").to(tl.float32) * r");
    if (op.weight != RowNormOp::Weight::kNone) {
      w->Line("y = y * tl.load(w_ptr + c" + m + (mask ? ", other=0.0" : "") + ").to(tl.float32)");
    }
    w->Line("tl.store(orow + c, y.to(o_ptr.dtype.element_ty)" + m + ")");
  }
}

}  // namespace

Status EmitRowNorm(const RowNormOp& op, size_t k, const RowNormSchedule& s, std::string* src) {
  if (!s.ValidFor(op)) return Status::Error("row norm " + std::to_string(k) + ": schedule does not fit its rows");
  const std::string name = "_ax_rnorm" + std::to_string(k);
  const bool has_w = op.weight != RowNormOp::Weight::kNone;
  const bool wide = op.rows * op.H >= kInt32Elements;
  PyWriter w;
  w.Line("@triton.jit");
  {
    auto fn = w.Open("def " + name + "_kernel(x_ptr, w_ptr, o_ptr):");
    w.Line("# RMSNorm over rows of " + I(op.H) + " (" + I(op.rows) + " rows): " + s.Describe());
    if (s.strategy == RowNormStrategy::kSplitRow) {
      EmitSplitRow(op, s, wide, &w);
    } else {
      EmitWholeRows(op, s, wide, &w);
    }
  }
  w.Line();
  w.Line();
  {
    auto fn = w.Open("def " + name + "(x" + std::string(has_w ? ", w" : "") + "):");
    {
      auto check = w.Open("if tuple(x.shape) != " + PyTupleShape(op.shape) + ":");
      w.Line("raise RuntimeError(\"" + name + ": the kernel was generated for shape " + PyShape(op.shape) +
             ", got \" + str(list(x.shape)))");
    }
    w.Line("x = x.contiguous()");
    if (has_w) w.Line("w = w.contiguous()");
    w.Line("out = torch.empty(" + PyShape(op.shape) + ", device=x.device, dtype=" + op.out_dtype + ")");
    const int64_t grid = (op.rows + s.rows - 1) / s.rows;
    w.Line(name + "_kernel[(" + I(grid) + ",)](x, " + std::string(has_w ? "w" : "x") + ", out, num_warps=" +
           I(s.warps) + ")");
    w.Line("return out");
  }
  w.Line();
  w.Line();
  *src += w.str();
  return Status::Ok();
}

}  // namespace ax::builtin
