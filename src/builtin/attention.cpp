#include "builtin/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "builtin/pywriter.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

std::string S(int64_t v) { return std::to_string(v); }

int64_t Pow2AtLeast(int64_t v, int64_t lo) {
  int64_t p = lo;
  while (p < v) p <<= 1;
  return p;
}

bool IsPow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

bool AttentionSchedule::Valid() const {
  return IsPow2(bm) && IsPow2(bn) && bm >= 16 && bn >= 16 && bm <= 256 && bn <= 256 && IsPow2(warps) &&
         warps <= 16 && stages >= 1 && stages <= 5;
}

json AttentionSchedule::ToJson() const { return json::array({bm, bn, warps, stages}); }

Status AttentionSchedule::FromJson(const json& j, AttentionSchedule* out) {
  if (!j.is_array() || j.size() != 4) return Status::Error("plan has a malformed attention schedule");
  for (const auto& e : j) {
    if (!e.is_number_integer()) return Status::Error("plan has a malformed attention schedule");
  }
  AttentionSchedule s{j[0].get<int>(), j[1].get<int>(), j[2].get<int>(), j[3].get<int>()};
  if (!s.Valid()) return Status::Error("plan has a bad attention schedule");
  *out = s;
  return Status::Ok();
}

bool ClassifyAttention(const Graph& g, const Node& n, AttentionOp* out) {
  if (n.op != "call_function" || !n.is_tensor || n.dtype != "torch.float32") return false;
  const std::string& c = n.callable;
  const bool explicit_form = c == kExplicitAttention;
  if (c != "torch._C._nn.scaled_dot_product_attention" && c != "torch.nn.functional.scaled_dot_product_attention" &&
      !explicit_form) {
    return false;
  }
  static const std::vector<std::string> kNames = {"query", "key", "value", "attn_mask", "dropout_p",
                                                  "is_causal", "scale", "enable_gqa"};
  if (n.args.size() > (explicit_form ? 3 : kNames.size())) return false;
  for (const auto& [key, v] : n.kwargs.items()) {
    if (explicit_form ? key != "scale" && key != "masked_fill"
                      : std::find(kNames.begin(), kNames.end(), key) == kNames.end()) {
      return false;
    }
  }
  const Node* t[3];
  for (size_t i = 0; i < 3; ++i) {
    const json* a = n.Arg(i, kNames[i]);
    t[i] = a && a->contains("node") ? g.Find((*a)["node"].get<std::string>()) : nullptr;
    if (!t[i] || !t[i]->is_tensor || t[i]->dtype != "torch.float32" || t[i]->shape.size() < 3) return false;
  }
  auto is_none = [](const json* a) { return !a || a->value("repr", "") == "None"; };
  auto number = [](const json* a, double* v) {
    if (!a || !a->contains("value") || !(*a)["value"].is_number()) return false;
    *v = (*a)["value"].get<double>();
    return true;
  };
  double d = 0;
  if (!is_none(n.Arg(3, "attn_mask"))) return false;
  if (const json* a = n.Arg(4, "dropout_p"); a && (!number(a, &d) || d != 0.0)) return false;
  AttentionOp op;
  if (const json* a = n.Arg(5, "is_causal"); a) {
    if (!a->contains("value") || !(*a)["value"].is_boolean()) return false;
    op.causal = (*a)["value"].get<bool>();
  }
  if (const json* a = n.Arg(7, "enable_gqa"); a && !(a->contains("value") && (*a)["value"] == false)) return false;
  const auto &qs = t[0]->shape, &ks = t[1]->shape, &vs = t[2]->shape;
  const size_t r = qs.size();
  if (ks.size() != r || vs.size() != r) return false;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (ks[i] != qs[i] || vs[i] != qs[i]) return false;
    op.batch *= qs[i];
  }
  op.L = qs[r - 2];
  op.E = qs[r - 1];
  op.S = ks[r - 2];
  op.EV = vs[r - 1];
  if (ks[r - 1] != op.E || vs[r - 2] != op.S || op.L <= 0 || op.S <= 0 || op.E <= 0 || op.EV <= 0) return false;
  op.scale = 1.0 / std::sqrt(static_cast<double>(op.E));
  if (const json* a = n.Arg(6, "scale"); !is_none(a) && !number(a, &op.scale)) return false;
  op.out_shape.assign(qs.begin(), qs.end() - 1);
  op.out_shape.push_back(op.EV);
  if (n.shape != op.out_shape) return false;
  if (const auto it = n.kwargs.find("masked_fill"); explicit_form && it != n.kwargs.end()) {
    // [..., L, S], each leading dimension 1 or the batch's
    const Node* m = it->contains("node") ? g.Find((*it)["node"].get<std::string>()) : nullptr;
    if (!m || !m->is_tensor || m->dtype != "torch.bool" || m->shape.size() < 2 || m->shape.size() > r) return false;
    const auto& ms = m->shape;
    if (ms[ms.size() - 2] != op.L || ms[ms.size() - 1] != op.S) return false;
    for (size_t i = 0; i + 2 < ms.size(); ++i) {
      const int64_t full = qs[r - ms.size() + i];
      if (ms[i] != 1 && ms[i] != full) return false;
    }
    op.mask = m->name;
    op.mask_shape = ms;
  }
  // Head dimensions a program holds in registers whole.
  if (op.E > 256 || op.EV > 256) return false;
  op.q = t[0]->name;
  op.k = t[1]->name;
  op.v = t[2]->name;
  op.q_shape = qs;
  op.k_shape = ks;
  op.v_shape = vs;
  *out = std::move(op);
  return true;
}

namespace {

// The node argument i refers to, or null.
const Node* ArgNode(const Graph& g, const Node& n, size_t i) {
  if (i >= n.args.size() || !n.args[i].is_object() || !n.args[i].contains("node")) return nullptr;
  return g.Find(n.args[i]["node"].get<std::string>());
}

bool Number(const json& a, double* v) {
  if (!a.is_object() || !a.contains("value") || !a["value"].is_number()) return false;
  *v = a["value"].get<double>();
  return true;
}

// The dimension argument d of a rank-r tensor, normalised to 0..r-1 (-1: none).
int64_t Dim(const json& a, size_t r) {
  double d = 0;
  if (!Number(a, &d) || d != static_cast<int64_t>(d)) return -1;
  const int64_t k = static_cast<int64_t>(d) < 0 ? static_cast<int64_t>(d) + static_cast<int64_t>(r)
                                                 : static_cast<int64_t>(d);
  return k >= 0 && k < static_cast<int64_t>(r) ? k : -1;
}

bool IsMatmul(const Graph& g, const Node& n) {
  const bool fn = n.op == "call_function" && (n.target == "matmul" || n.target == "bmm");
  const bool method = n.op == "call_method" && (n.target == "matmul" || n.target == "bmm");
  return (fn || method) && n.args.size() == 2 && n.kwargs.empty() && ArgNode(g, n, 0) && ArgNode(g, n, 1);
}

// x.transpose(-2, -1) (either order) of a tensor of rank >= 3: x, else null.
const Node* TransposedLastTwo(const Graph& g, const Node& n) {
  if (!((n.op == "call_method" || n.op == "call_function") && n.target == "transpose") || n.args.size() != 3 ||
      !n.kwargs.empty()) {
    return nullptr;
  }
  const Node* x = ArgNode(g, n, 0);
  if (!x || x->shape.size() < 3) return nullptr;
  const size_t r = x->shape.size();
  const int64_t a = Dim(n.args[1], r), b = Dim(n.args[2], r);
  const int64_t lo = static_cast<int64_t>(r) - 2, hi = static_cast<int64_t>(r) - 1;
  return (a == lo && b == hi) || (a == hi && b == lo) ? x : nullptr;
}

// t * c, c * t or t / c with c a number: t, and the factor in *c.
const Node* Scaled(const Graph& g, const Node& n, double* c) {
  if (!(n.op == "call_function" || n.op == "call_method") || n.args.size() != 2 || !n.kwargs.empty()) return nullptr;
  double v = 0;
  if (n.target == "mul") {
    const Node* t = ArgNode(g, n, 0);
    if (t && Number(n.args[1], &v)) return *c = v, t;
    t = ArgNode(g, n, 1);
    if (t && Number(n.args[0], &v)) return *c = v, t;
  } else if (n.target == "truediv" || n.target == "div") {
    const Node* t = ArgNode(g, n, 0);
    if (t && Number(n.args[1], &v) && v != 0.0) return *c = 1.0 / v, t;
  }
  return nullptr;
}

// t.masked_fill(mask, -inf): t, and the mask in *mask.
const Node* MaskedToMinusInf(const Graph& g, const Node& n, const Node** mask) {
  if (n.op != "call_method" || n.target != "masked_fill" || n.args.size() != 3 || !n.kwargs.empty()) return nullptr;
  const json& fill = n.args[2];
  const std::string repr = fill.is_object() ? fill.value("repr", "") : "";
  const bool minus_inf = repr == "float('-inf')" || repr == "float(\"-inf\")" || repr == "-inf" ||
                         repr == "-math.inf" || repr == "-torch.inf";
  if (!minus_inf) return nullptr;
  *mask = ArgNode(g, n, 1);
  return *mask ? ArgNode(g, n, 0) : nullptr;
}

// softmax over the last dimension (F.softmax, torch.softmax, Tensor.softmax), no dtype: its input.
const Node* SoftmaxLast(const Graph& g, const Node& n) {
  if (!((n.op == "call_function" || n.op == "call_method") && n.target == "softmax")) return nullptr;
  const Node* x = ArgNode(g, n, 0);
  if (!x || x->shape.empty() || n.args.size() > 2) return nullptr;
  const json* dim = n.args.size() == 2 ? &n.args[1] : (n.kwargs.contains("dim") ? &n.kwargs["dim"] : nullptr);
  for (const auto& [key, v] : n.kwargs.items()) {
    if (key == "dtype" ? v.value("repr", "") != "None" : key != "dim" && key != "_stacklevel") return nullptr;
  }
  return dim && Dim(*dim, x->shape.size()) == static_cast<int64_t>(x->shape.size()) - 1 ? x : nullptr;
}

// A Dropout module that passes its input through (p = 0, or eval mode): its input.
const Node* IdentityDropout(const Graph& g, const Node& n) {
  if (n.op != "call_module" || n.ModuleClass() != "Dropout" || n.args.size() != 1 || !n.kwargs.empty()) return nullptr;
  const json& attrs = n.module.contains("attrs") ? n.module["attrs"] : json::object();
  const double p = attrs.contains("p") && attrs["p"].is_number() ? attrs["p"].get<double>() : 0.5;
  return AttrOr(attrs, "training", true) && p != 0.0 ? nullptr : ArgNode(g, n, 0);
}

json NumberArg(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return {{"repr", buf}, {"value", v}};
}

}  // namespace

int LowerExplicitAttention(const Graph& g, Graph* out) {
  std::set<std::string> dropped;
  std::map<std::string, Node> replaced;  // the last product -> its attention node
  auto only_reader = [](const Node* n) { return n && n->users.size() == 1; };
  for (const Node& pv : g.nodes) {
    if (!IsMatmul(g, pv)) continue;
    const Node* v = ArgNode(g, pv, 1);
    const Node* x = ArgNode(g, pv, 0);
    std::vector<std::string> chain;  // the nodes the attention node replaces
    if (const Node* in = only_reader(x) ? IdentityDropout(g, *x) : nullptr) {
      chain.push_back(x->name);
      x = in;
    }
    const Node* scores = only_reader(x) ? SoftmaxLast(g, *x) : nullptr;
    if (!scores) continue;
    chain.push_back(x->name);
    const Node* mask = nullptr;
    if (const Node* in = only_reader(scores) ? MaskedToMinusInf(g, *scores, &mask) : nullptr) {
      chain.push_back(scores->name);
      scores = in;
    }
    double scale = 1.0;
    if (const Node* in = only_reader(scores) ? Scaled(g, *scores, &scale) : nullptr) {
      chain.push_back(scores->name);
      scores = in;
    }
    if (!only_reader(scores) || !IsMatmul(g, *scores)) continue;
    chain.push_back(scores->name);
    const Node* q = ArgNode(g, *scores, 0);
    const Node* kt = ArgNode(g, *scores, 1);
    const Node* k = TransposedLastTwo(g, *kt);
    if (!k) continue;
    if (only_reader(kt)) chain.push_back(kt->name);
    Node a = pv;
    a.op = "call_function";
    a.target = "explicit_attention";
    a.callable = kExplicitAttention;
    a.module = json();
    a.args = json::array({json{{"node", q->name}}, json{{"node", k->name}}, json{{"node", v->name}}});
    a.kwargs = json{{"scale", NumberArg(scale)}};
    if (mask) a.kwargs["masked_fill"] = json{{"node", mask->name}};
    AttentionOp op;
    if (!ClassifyAttention(g, a, &op)) continue;
    dropped.insert(chain.begin(), chain.end());
    replaced[pv.name] = std::move(a);
  }
  if (replaced.empty()) {
    *out = g;
    return 0;
  }
  Graph r;
  r.training = g.training;
  for (const Node& n : g.nodes) {
    if (dropped.count(n.name)) continue;
    auto it = replaced.find(n.name);
    r.nodes.push_back(it != replaced.end() ? it->second : n);
  }
  if (!LinkGraph(&r).ok()) {
    *out = g;
    return 0;
  }
  *out = std::move(r);
  return static_cast<int>(replaced.size());
}

AttentionSchedule DefaultAttentionSchedule(const AttentionOp& op) {
  AttentionSchedule s;
  s.bm = op.L >= 128 ? 64 : 32;
  s.bn = op.S >= 128 ? 64 : 32;
  s.warps = std::max(op.E, op.EV) > 64 ? 8 : 4;
  s.stages = 2;
  return s;
}

Status EmitAttention(const AttentionOp& op, size_t k, const AttentionSchedule& s, std::string* src) {
  if (!s.Valid()) return Status::Error("an attention schedule out of range");
  const std::string ks = S(static_cast<int64_t>(k));
  const std::string kname = "_ax_attn_kernel" + ks;
  const int64_t be = Pow2AtLeast(op.E, 16), bev = Pow2AtLeast(op.EV, 16);
  PyWriter w;
  w.Line("@triton.jit");
  {
    const bool masked = !op.mask.empty();
    auto body = w.Open("def " + kname + "(q, kk, v, out, " + (masked ? "mask, MSB, MSL, MSS, " : "") +
                       "L: tl.constexpr, S: tl.constexpr, E: tl.constexpr, EV: tl.constexpr, "
                       "SCALE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, "
                       "BE: tl.constexpr, BEV: tl.constexpr):");
    w.Line(std::string("# attention") + (op.causal ? " (causal)" : "") + (masked ? " (masked)" : "") + ": L " +
           S(op.L) + ", S " + S(op.S) + ", E " + S(op.E) + ", Ev " + S(op.EV) +
           "; online softmax, the scores never written");
    w.Line("pid_m = tl.program_id(0)");
    w.Line("bh = tl.program_id(1).to(tl.int64)");
    w.Line("rm = pid_m * BM + tl.arange(0, BM)");
    w.Line("re = tl.arange(0, BE)");
    w.Line("rv = tl.arange(0, BEV)");
    w.Line("qt = tl.load(q + bh * (L * E) + rm[:, None] * E + re[None, :], "
           "mask=(rm[:, None] < L) & (re[None, :] < E), other=0.0)");
    w.Line("m_i = tl.full([BM], float('-inf'), tl.float32)");
    w.Line("l_i = tl.zeros([BM], tl.float32)");
    w.Line("acc = tl.zeros([BM, BEV], tl.float32)");
    if (op.causal) w.Line("hi = tl.minimum((pid_m + 1) * BM, S)  # past the last key this block's queries see");
    {
      auto loop = w.Open("for start in range(0, S, BN):");
      // A causal block's later key blocks are skipped (a bound the loop
      // itself cannot take: Triton's interpreter wants it constant).
      std::optional<PyWriter::Block> visible;
      if (op.causal) {
        w.Line("if start < hi:");
        visible.emplace(&w);
      }
      w.Line("rn = start + tl.arange(0, BN)");
      w.Line("kt = tl.load(kk + bh * (S * E) + rn[None, :] * E + re[:, None], "
             "mask=(rn[None, :] < S) & (re[:, None] < E), other=0.0)");
      w.Line("s = tl.dot(qt, kt, input_precision=\"tf32x3\") * SCALE");
      w.Line(op.causal ? "valid = (rn[None, :] < S) & (rn[None, :] <= rm[:, None])" : "valid = rn[None, :] < S");
      if (masked) {
        // where the mask is true the score is -inf (masked_fill)
        w.Line("mt = tl.load(mask + bh * MSB + rm[:, None] * MSL + rn[None, :] * MSS, "
               "mask=(rm[:, None] < L) & (rn[None, :] < S), other=0)");
        w.Line("valid = valid & (mt == 0)");
      }
      w.Line("s = tl.where(valid, s, float('-inf'))");
      w.Line("m_new = tl.maximum(m_i, tl.max(s, 1))");
      w.Line("m_use = tl.where(m_new == float('-inf'), 0.0, m_new)  # a row with no visible key yet");
      w.Line("alpha = tl.exp(m_i - m_use)");
      w.Line("p = tl.exp(s - m_use[:, None])");
      w.Line("l_i = l_i * alpha + tl.sum(p, 1)");
      w.Line("vt = tl.load(v + bh * (S * EV) + rn[:, None] * EV + rv[None, :], "
             "mask=(rn[:, None] < S) & (rv[None, :] < EV), other=0.0)");
      w.Line("acc = acc * alpha[:, None] + tl.dot(p, vt, input_precision=\"tf32x3\")");
      w.Line("m_i = m_new");
    }
    w.Line("tl.store(out + bh * (L * EV) + rm[:, None] * EV + rv[None, :], acc / l_i[:, None], "
           "mask=(rm[:, None] < L) & (rv[None, :] < EV))");
  }
  PyWriter l;
  {
    const bool masked = !op.mask.empty();
    auto body = l.Open("def _ax_attn" + ks + (masked ? "(q, k, v, mask):" : "(q, k, v):"));
    const char* kShapes = ", \"the kernel was generated for the traced shapes\"";
    l.Line("assert list(q.shape) == " + PyShape(op.q_shape) + kShapes);
    l.Line("assert list(k.shape) == " + PyShape(op.k_shape) + kShapes);
    l.Line("assert list(v.shape) == " + PyShape(op.v_shape) + kShapes);
    l.Line("q, k, v = q.contiguous(), k.contiguous(), v.contiguous()");
    std::string mask_args;
    if (masked) {
      l.Line("assert list(mask.shape) == " + PyShape(op.mask_shape) + kShapes);
      bool shared = true;  // one [L, S] mask for every (batch, head)
      for (size_t i = 0; i + 2 < op.mask_shape.size(); ++i) shared = shared && op.mask_shape[i] == 1;
      if (shared) {
        l.Line("m = mask.reshape(" + S(op.L) + ", " + S(op.S) + ").view(torch.uint8)");
        mask_args = "m, 0, m.stride(0), m.stride(1), ";
      } else {
        l.Line("m = mask.expand(" + PyShape(std::vector<int64_t>(op.out_shape.begin(), op.out_shape.end() - 1)) +
               " + [" + S(op.S) + "]).contiguous().view(torch.uint8)");
        mask_args = "m, " + S(op.L * op.S) + ", " + S(op.S) + ", 1, ";
      }
    }
    l.Line("out = torch.empty(" + PyShape(op.out_shape) + ", device=q.device, dtype=torch.float32)");
    l.Line("grid = (triton.cdiv(" + S(op.L) + ", " + S(s.bm) + "), " + S(op.batch) + ")");
    l.Line(kname + "[grid](q, k, v, out, " + mask_args + "L=" + S(op.L) + ", S=" + S(op.S) + ", E=" + S(op.E) +
           ", EV=" + S(op.EV) +
           ", SCALE=" + PyFloat(op.scale) + ", BM=" + S(s.bm) +
           ", BN=" + S(s.bn) + ", BE=" + S(be) + ", BEV=" + S(bev) + ", num_warps=" + S(s.warps) +
           ", num_stages=" + S(s.stages) + ")");
    l.Line("return out");
  }
  *src += w.str() + "\n\n" + l.str() + "\n\n";
  return Status::Ok();
}

}  // namespace ax::builtin
