#include "builtin/attention.h"

#include <algorithm>
#include <cmath>
#include <optional>

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
  if (c != "torch._C._nn.scaled_dot_product_attention" && c != "torch.nn.functional.scaled_dot_product_attention") {
    return false;
  }
  static const std::vector<std::string> kNames = {"query", "key", "value", "attn_mask", "dropout_p",
                                                  "is_causal", "scale", "enable_gqa"};
  if (n.args.size() > kNames.size()) return false;
  for (const auto& [key, v] : n.kwargs.items()) {
    if (std::find(kNames.begin(), kNames.end(), key) == kNames.end()) return false;
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
    auto body = w.Open("def " + kname +
                       "(q, kk, v, out, L: tl.constexpr, S: tl.constexpr, E: tl.constexpr, EV: tl.constexpr, "
                       "SCALE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, "
                       "BE: tl.constexpr, BEV: tl.constexpr):");
    w.Line(std::string("# attention") + (op.causal ? " (causal)" : "") + ": L " + S(op.L) + ", S " + S(op.S) +
           ", E " + S(op.E) + ", Ev " + S(op.EV) + "; online softmax, the scores never written");
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
    auto body = l.Open("def _ax_attn" + ks + "(q, k, v):");
    const char* kShapes = ", \"the kernel was generated for the traced shapes\"";
    l.Line("assert list(q.shape) == " + PyShape(op.q_shape) + kShapes);
    l.Line("assert list(k.shape) == " + PyShape(op.k_shape) + kShapes);
    l.Line("assert list(v.shape) == " + PyShape(op.v_shape) + kShapes);
    l.Line("q, k, v = q.contiguous(), k.contiguous(), v.contiguous()");
    l.Line("out = torch.empty(" + PyShape(op.out_shape) + ", device=q.device, dtype=torch.float32)");
    l.Line("grid = (triton.cdiv(" + S(op.L) + ", " + S(s.bm) + "), " + S(op.batch) + ")");
    l.Line(kname + "[grid](q, k, v, out, L=" + S(op.L) + ", S=" + S(op.S) + ", E=" + S(op.E) + ", EV=" + S(op.EV) +
           ", SCALE=" + PyFloat(op.scale) + ", BM=" + S(s.bm) +
           ", BN=" + S(s.bn) + ", BE=" + S(be) + ", BEV=" + S(bev) + ", num_warps=" + S(s.warps) +
           ", num_stages=" + S(s.stages) + ")");
    l.Line("return out");
  }
  *src += w.str() + "\n\n" + l.str() + "\n\n";
  return Status::Ok();
}

}  // namespace ax::builtin
