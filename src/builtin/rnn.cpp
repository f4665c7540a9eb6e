#include "builtin/rnn.h"

#include <algorithm>

#include "builtin/pywriter.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

std::string S(int64_t v) { return std::to_string(v); }

bool IsPow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

int64_t Pow2AtLeast(int64_t v, int64_t lo) {
  int64_t p = lo;
  while (p < v) p <<= 1;
  return p;
}

// The single node an argument names, else nullptr.
const Node* NodeArg(const Graph& g, const json& a) {
  if (!a.is_object() || !a.contains("node")) return nullptr;
  return g.Find(a.at("node").get<std::string>());
}

bool IsNone(const json& a) {
  json v;
  return PlainArg(a, &v) && v.is_null();
}

// A float32 tensor node of the given shape.
bool StateOfShape(const Node* n, const std::vector<int64_t>& shape) {
  return n && n->is_tensor && n->dtype == "torch.float32" && n->shape == shape;
}

// The gate rows [g*H, (g+1)*H) of a packed weight: names of the accumulators.
const char* GateName(const std::string& mode, int g) {
  static const char* const kGru[] = {"r", "z", "n"};
  static const char* const kLstm[] = {"i", "f", "g", "o"};
  if (mode == "GRU") return kGru[g];
  if (mode == "LSTM") return kLstm[g];
  return "a";
}

}  // namespace

bool RnnSchedule::Valid() const {
  return IsPow2(bj) && IsPow2(bk) && IsPow2(bb) && bj >= 16 && bk >= 16 && bb >= 16 && bj <= 128 && bk <= 256 &&
         bb <= 128 && IsPow2(warps) && warps <= 16 && stages >= 1 && stages <= 4 && (pre == 0 || pre == 1);
}

json RnnSchedule::ToJson() const { return json::array({bj, bk, bb, warps, stages, pre}); }

Status RnnSchedule::FromJson(const json& j, RnnSchedule* out) {
  if (!j.is_array() || (j.size() != 5 && j.size() != 6)) {
    return Status::Error("plan has a malformed recurrent schedule");
  }
  for (const auto& e : j) {
    if (!e.is_number_integer()) return Status::Error("plan has a malformed recurrent schedule");
  }
  RnnSchedule s{j[0].get<int>(), j[1].get<int>(), j[2].get<int>(), j[3].get<int>(), j[4].get<int>(),
                j.size() > 5 ? j[5].get<int>() : 0};
  if (!s.Valid()) return Status::Error("plan has a bad recurrent schedule");
  *out = s;
  return Status::Ok();
}

bool ClassifyRnn(const Graph& g, const Node& n, RnnOp* out) {
  if (n.op != "call_module") return false;
  const std::string cls = n.ModuleClass();
  if (cls != "GRU" && cls != "LSTM" && cls != "RNN") return false;
  const json& attrs = n.module.value("attrs", json::object());
  const json& params = n.module.value("params", json::object());
  RnnOp op;
  op.mode = AttrOr<std::string>(attrs, "mode", "");
  if (op.mode == "GRU") op.gates = 3;
  else if (op.mode == "LSTM") op.gates = 4;
  else if (op.mode == "RNN_TANH" || op.mode == "RNN_RELU") op.gates = 1;
  else return false;
  op.hidden = AttrOr<int64_t>(attrs, "hidden_size", 0);
  op.layers = AttrOr<int64_t>(attrs, "num_layers", 0);
  op.dirs = AttrOr(attrs, "bidirectional", false) ? 2 : 1;
  op.batch_first = AttrOr(attrs, "batch_first", false);
  if (op.hidden <= 0 || op.layers <= 0) return false;
  // Dropout between layers draws random numbers in training mode: only
  // without it (the tracer reports it; an older trace without it is refused).
  const double dropout = AttrOr<double>(attrs, "dropout", -1.0);
  if (dropout < 0 || (dropout > 0 && op.layers > 1 && AttrOr(attrs, "training", true))) return false;
  if (AttrOr<int64_t>(attrs, "proj_size", 0) != 0 || params.contains("weight_hr_l0")) return false;
  // The input: [T, B, I] (batch_first: [B, T, I]) or [T, I], float32.
  if (n.args.empty() || n.args.size() > 2) return false;
  for (const auto& [key, v] : n.kwargs.items()) {
    if (key != "hx") return false;
  }
  const Node* x = NodeArg(g, n.args[0]);
  if (!x || !x->is_tensor || x->dtype != "torch.float32" || (x->shape.size() != 3 && x->shape.size() != 2)) {
    return false;
  }
  op.x = x->name;
  op.x_shape = x->shape;
  op.unbatched = x->shape.size() == 2;
  op.seq = x->shape[op.batch_first && !op.unbatched ? 1 : 0];
  op.batch = op.unbatched ? 1 : x->shape[op.batch_first ? 0 : 1];
  op.input = x->shape.back();
  if (op.seq <= 0 || op.batch <= 0 || op.input <= 0) return false;
  // The weights: [G*H, I] for layer 0, [G*H, D*H] above, [G*H, H] hidden.
  const int64_t gh = op.gates * op.hidden;
  auto shape_of = [&](const std::string& name) -> std::vector<int64_t> {
    if (!params.contains(name)) return {};
    return params.at(name).value("shape", std::vector<int64_t>{});
  };
  op.bias = params.contains("bias_ih_l0");
  for (int64_t l = 0; l < op.layers; ++l) {
    for (int64_t d = 0; d < op.dirs; ++d) {
      const std::string sfx = S(l) + (d ? "_reverse" : "");
      if (shape_of("weight_ih_l" + sfx) != std::vector<int64_t>{gh, l == 0 ? op.input : op.dirs * op.hidden}) return false;
      if (shape_of("weight_hh_l" + sfx) != std::vector<int64_t>{gh, op.hidden}) return false;
      if (op.bias && (shape_of("bias_ih_l" + sfx) != std::vector<int64_t>{gh} ||
                      shape_of("bias_hh_l" + sfx) != std::vector<int64_t>{gh})) {
        return false;
      }
    }
  }
  // The initial states: none, h0 (GRU, RNN) or (h0, c0) (LSTM).
  const json* hx = n.args.size() > 1 ? &n.args[1] : (n.kwargs.contains("hx") ? &n.kwargs.at("hx") : nullptr);
  const std::vector<int64_t> state = op.unbatched ? std::vector<int64_t>{op.layers * op.dirs, op.hidden}
                                                  : std::vector<int64_t>{op.layers * op.dirs, op.batch, op.hidden};
  if (hx && !IsNone(*hx)) {
    if (op.mode == "LSTM") {
      if (!hx->is_object() || !hx->contains("tuple") || hx->at("tuple").size() != 2) return false;
      const Node* h0 = NodeArg(g, hx->at("tuple")[0]);
      const Node* c0 = NodeArg(g, hx->at("tuple")[1]);
      if (!StateOfShape(h0, state) || !StateOfShape(c0, state)) return false;
      op.h0 = h0->name;
      op.c0 = c0->name;
    } else {
      const Node* h0 = NodeArg(g, *hx);
      if (!StateOfShape(h0, state)) return false;
      op.h0 = h0->name;
    }
  }
  op.module = n.target;
  *out = std::move(op);
  return true;
}

RnnSchedule DefaultRnnSchedule(const RnnOp& op) {
  RnnSchedule s;
  s.bb = static_cast<int>(std::min<int64_t>(64, Pow2AtLeast(op.batch, 16)));
  s.bj = op.hidden >= 512 ? 32 : 16;
  s.bk = std::max(op.input, op.dirs * op.hidden) >= 256 ? 64 : 32;
  s.warps = s.bb >= 64 ? 4 : 2;
  s.stages = 2;
  s.pre = op.Wavefront() ? 0 : 1;
  return s;
}

namespace {

// The kernel: one program per (hidden block, direction, layer x batch block).
void EmitRnnKernel(const RnnOp& op, const std::string& kname, int64_t km, bool wide, bool pre, PyWriter* wp) {
  PyWriter& w = *wp;
  const int G = op.gates;
  const bool gru = op.mode == "GRU", lstm = op.mode == "LSTM";
  w.Line("@triton.jit(do_not_specialize=[\"w\", \"l0\"])");
  auto body = w.Open("def " + kname +
                     "(S, WI, WH, BI, BH, H0, C, HN, GI, w, l0, T: tl.constexpr, B: tl.constexpr, "
                     "H: tl.constexpr, D: tl.constexpr, KX: tl.constexpr, KM: tl.constexpr, NB: tl.constexpr, "
                     "BB: tl.constexpr, BJ: tl.constexpr, BK: tl.constexpr):");
  w.Line("# " + op.mode + ", " + S(op.layers) + " layer(s), " + S(op.dirs) + " direction(s): BJ hidden units of one " +
         "(layer, direction) at one step, both projections and the cell update in registers");
  w.Line("pj = tl.program_id(0)");
  w.Line("d = tl.program_id(1)");
  w.Line("pl = tl.program_id(2) // NB");
  w.Line("pb = tl.program_id(2) % NB");
  w.Line("l = l0 + pl  # the layer");
  w.Line(op.Wavefront() ? "s = w - pl  # its step: launch w runs step w - l of layer l"
                        : "s = w - pl  # its step (pl is 0: one layer per launch)");
  w.Line("active = (s >= 0) & (s < T)");
  w.Line("td = tl.where(d == 0, s, T - 1 - s)  # the time it computes");
  w.Line("tp = tl.where(d == 0, td - 1, td + 1)  # the time of the state it reads");
  if (!pre) w.Line("kl = tl.where(l == 0, KX, D * H)  # its input's width");
  w.Line("ld = l * D + d  # its row of the states");
  w.Line("rb = pb * BB + tl.arange(0, BB)");
  w.Line("rj = pj * BJ + tl.arange(0, BJ)");
  w.Line("rk = tl.arange(0, BK)");
  w.Line("mb = (rb < B) & active");
  w.Line("mj = rj < H");
  const std::string l64 = wide ? "l.to(tl.int64)" : "l";
  if (!pre) w.Line("xrow = ((" + l64 + " * T + td) * B + rb) * KM  # the layer's input at td (slot l)");
  w.Line("hrow = (((" + l64 + " + 1) * T + tp) * B + rb) * KM + d * H  # its own output at tp (slot l + 1)");
  w.Line("h0row = (ld * B + rb) * H");
  w.Line("first = s == 0");
  for (int g = 0; g < G; ++g) w.Line(std::string("acc_") + GateName(op.mode, g) + " = tl.zeros([BB, BJ], tl.float32)");
  if (gru) w.Line("acc_hn = tl.zeros([BB, BJ], tl.float32)  # W_hn h: r scales it with its bias");
  if (pre) {
    // The layer's input projections (biases included) were computed for all
    // steps before them: [T * B, D * G * H].
    w.Line("girow = (td * B + rb) * (D * " + S(G) + " * H) + d * " + S(G) + " * H");
    w.Line("mg = mb[:, None] & mj[None, :]");
    for (int g = 0; g < G; ++g) {
      w.Line(std::string("acc_") + GateName(op.mode, g) + " += tl.load(GI + girow[:, None] + " + S(g) +
             " * H + rj[None, :], mask=mg, other=0.0)");
    }
  } else {
    w.Line("wi = WI + (ld * " + S(G) + " * H + rj) * KM");
    auto loop = w.Open("for k0 in range(0, KM, BK):");
    w.Line("kk = k0 + rk");
    w.Line("xk = tl.load(S + xrow[:, None] + kk[None, :], mask=mb[:, None] & (kk[None, :] < kl), other=0.0)");
    for (int g = 0; g < G; ++g) {
      const std::string a = std::string("acc_") + GateName(op.mode, g);
      w.Line("wg = tl.load(wi[None, :] + " + S(g) + " * H * KM + kk[:, None], mask=mj[None, :] & (kk[:, None] < KM), "
             "other=0.0)");
      w.Line(a + " += tl.dot(xk, wg, input_precision=\"tf32x3\")");
    }
  }
  w.Line("wh = WH + (ld * " + S(G) + " * H + rj) * H");
  {
    auto loop = w.Open("for k0 in range(0, H, BK):");
    w.Line("kk = k0 + rk");
    w.Line("mk = mb[:, None] & (kk[None, :] < H)");
    w.Line("hk = tl.load(S + hrow[:, None] + kk[None, :], mask=mk & (s > 0), other=0.0) + "
           "tl.load(H0 + h0row[:, None] + kk[None, :], mask=mk & first, other=0.0)");
    for (int g = 0; g < G; ++g) {
      const std::string a = gru && g == 2 ? "acc_hn" : std::string("acc_") + GateName(op.mode, g);
      w.Line("wg = tl.load(wh[None, :] + " + S(g) + " * H * H + kk[:, None], mask=mj[None, :] & (kk[:, None] < H), "
             "other=0.0)");
      w.Line(a + " += tl.dot(hk, wg, input_precision=\"tf32x3\")");
    }
  }
  w.Line("m = mb[:, None] & mj[None, :]");
  if (op.bias) {
    w.Line("brow = ld * " + S(G) + " * H + rj");
    for (int g = 0; g < G; ++g) {
      const std::string gs = S(g);
      if (pre) {  // b_ih is in the precomputed projection
        w.Line(std::string(gru && g == 2 ? "acc_hn" : "acc_" + std::string(GateName(op.mode, g))) + " += tl.load(BH + brow + " +
               gs + " * H, mask=mj, other=0.0)[None, :]");
      } else if (gru && g == 2) {
        w.Line("acc_n += tl.load(BI + brow + " + gs + " * H, mask=mj, other=0.0)[None, :]");
        w.Line("acc_hn += tl.load(BH + brow + " + gs + " * H, mask=mj, other=0.0)[None, :]");
      } else {
        const std::string a = std::string("acc_") + GateName(op.mode, g);
        w.Line(a + " += (tl.load(BI + brow + " + gs + " * H, mask=mj, other=0.0) + tl.load(BH + brow + " + gs +
               " * H, mask=mj, other=0.0))[None, :]");
      }
    }
  }
  auto tanh = [](const std::string& x) { return "(2.0 / (1.0 + tl.exp(-2.0 * (" + x + "))) - 1.0)"; };
  if (gru) {
    w.Line("hp = tl.load(S + hrow[:, None] + rj[None, :], mask=m & (s > 0), other=0.0) + "
           "tl.load(H0 + h0row[:, None] + rj[None, :], mask=m & first, other=0.0)");
    w.Line("r = tl.sigmoid(acc_r)");
    w.Line("z = tl.sigmoid(acc_z)");
    w.Line("n = " + tanh("acc_n + r * acc_hn"));
    w.Line("h = (1.0 - z) * n + z * hp");
  } else if (lstm) {
    w.Line("crow = (ld * B + rb) * H");
    w.Line("cp = tl.load(C + crow[:, None] + rj[None, :], mask=m, other=0.0)");
    w.Line("c = tl.sigmoid(acc_f) * cp + tl.sigmoid(acc_i) * " + tanh("acc_g"));
    w.Line("tl.store(C + crow[:, None] + rj[None, :], c, mask=m)");
    w.Line("h = tl.sigmoid(acc_o) * " + tanh("c"));
  } else if (op.mode == "RNN_TANH") {
    w.Line("h = " + tanh("acc_a"));
  } else {
    w.Line("h = tl.maximum(acc_a, 0.0)");
  }
  w.Line("orow = (((" + l64 + " + 1) * T + td) * B + rb) * KM + d * H");
  w.Line("tl.store(S + orow[:, None] + rj[None, :], h, mask=m)");
  w.Line("tl.store(HN + h0row[:, None] + rj[None, :], h, mask=m & (s == T - 1))  # the last step's state: h_n");
}

// A layer's input projections for every step, [T * B, D * G * H] = its input
// (slot la of S, its first kl columns) times the layer's packed input
// weights, plus b_ih: a tiled split-TF32 product.
void EmitRnnProjection(const RnnOp& op, const std::string& name, bool wide, PyWriter* wp) {
  PyWriter& w = *wp;
  w.Line("@triton.jit(do_not_specialize=[\"la\"])");
  auto body = w.Open("def " + name +
                     "(S, WI, BI, GI, la, M: tl.constexpr, N: tl.constexpr, KX: tl.constexpr, KW: tl.constexpr, "
                     "KM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):");
  w.Line("# layer la's input projections for all steps and directions: [T * B, D * G * H]");
  w.Line("rm = tl.program_id(0) * BM + tl.arange(0, BM)");
  w.Line("rn = tl.program_id(1) * BN + tl.arange(0, BN)");
  w.Line("rk = tl.arange(0, BK)");
  w.Line("kl = tl.where(la == 0, KX, KW)");
  w.Line(std::string("arow = (la") + (wide ? ".to(tl.int64)" : "") + " * M + rm) * KM");
  w.Line("brow = (la * N + rn) * KM");
  w.Line("acc = tl.zeros([BM, BN], tl.float32)");
  {
    auto loop = w.Open("for k0 in range(0, KM, BK):");
    w.Line("kk = k0 + rk");
    w.Line("a = tl.load(S + arow[:, None] + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < kl), other=0.0)");
    w.Line("b = tl.load(WI + brow[None, :] + kk[:, None], mask=(rn[None, :] < N) & (kk[:, None] < KM), other=0.0)");
    w.Line("acc += tl.dot(a, b, input_precision=\"tf32x3\")");
  }
  if (op.bias) w.Line("acc += tl.load(BI + la * N + rn, mask=rn < N, other=0.0)[None, :]");
  w.Line(std::string("tl.store(GI + rm") + (wide ? ".to(tl.int64)" : "") +
         "[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))");
}

// The packer: the module's weights as [L, D, G*H, KM] (input, zero-padded
// past each layer's width), [L, D, G*H, H] (hidden) and [L, D, G*H] biases.
void EmitRnnPack(const RnnOp& op, const std::string& name, int64_t km, PyWriter* lp) {
  PyWriter& l = *lp;
  const int64_t gh = op.gates * op.hidden;
  auto body = l.Open("def " + name + "(ws):");
  l.Line("# the module's flat weights (w_ih, w_hh[, b_ih, b_hh] per layer and direction) as blocks");
  l.Line("dev = ws[0].device");
  l.Line("wi = torch.zeros(" + S(op.layers) + ", " + S(op.dirs) + ", " + S(gh) + ", " + S(km) +
         ", device=dev, dtype=torch.float32)");
  l.Line("wh = torch.empty(" + S(op.layers) + ", " + S(op.dirs) + ", " + S(gh) + ", " + S(op.hidden) +
         ", device=dev, dtype=torch.float32)");
  l.Line("bi = torch.zeros(" + S(op.layers) + ", " + S(op.dirs) + ", " + S(gh) + ", device=dev, dtype=torch.float32)");
  l.Line("bh = torch.zeros_like(bi)");
  const int per = op.bias ? 4 : 2;
  {
    auto loop = l.Open("for i in range(" + S(op.layers * op.dirs) + "):");
    l.Line("la, di = divmod(i, " + S(op.dirs) + ")");
    l.Line("wi[la, di, :, :ws[i * " + S(per) + "].shape[1]] = ws[i * " + S(per) + "]");
    l.Line("wh[la, di] = ws[i * " + S(per) + " + 1]");
    if (op.bias) {
      l.Line("bi[la, di] = ws[i * 4 + 2]");
      l.Line("bh[la, di] = ws[i * 4 + 3]");
    }
  }
  l.Line("return wi, wh, bi, bh");
}

}  // namespace

Status EmitRnn(const RnnOp& op, size_t k, const RnnSchedule& s, std::string* src) {
  if (!s.Valid()) return Status::Error("a recurrent schedule out of range");
  const std::string ks = S(static_cast<int64_t>(k));
  const std::string kname = "_ax_rnn_kernel" + ks, pname = "_ax_rnn_pack" + ks;
  const int64_t km = std::max(op.input, op.dirs * op.hidden);
  const int64_t nb = (op.batch + s.bb - 1) / s.bb;
  const bool wide = (op.layers + 1) * op.seq * op.batch * km >= (int64_t{1} << 31);
  const bool pre = s.pre == 1 && !op.Wavefront();
  const std::string projname = "_ax_rnn_proj" + ks;
  PyWriter w;
  EmitRnnKernel(op, kname, km, wide, pre, &w);
  if (pre) {
    w.Line();
    w.Line();
    EmitRnnProjection(op, projname, wide, &w);
  }
  PyWriter l;
  EmitRnnPack(op, pname, km, &l);
  l.Line();
  l.Line();
  const bool lstm = op.mode == "LSTM";
  {
    auto body = l.Open("def _ax_rnn" + ks + "(x, h0, " + (lstm ? "c0, " : "") + "module):");
    l.Line("assert list(x.shape) == " + PyShape(op.x_shape) + ", \"the kernel was generated for the traced shapes\"");
    if (op.unbatched) {
      l.Line("# unbatched: a batch of one");
      l.Line(std::string("x, h0") + (lstm ? ", c0" : "") + " = x.unsqueeze(1), None if h0 is None else h0.unsqueeze(1)" +
             (lstm ? ", None if c0 is None else c0.unsqueeze(1)" : ""));
    }
    l.Line("wi, wh, bi, bh = _ax_packed_weight(tuple(getattr(module, n) for n in module._flat_weights_names), " +
           pname + ")");
    const std::string T = S(op.seq), B = S(op.batch), H = S(op.hidden), L = S(op.layers), D = S(op.dirs);
    l.Line("seq = torch.empty(" + S(op.layers + 1) + ", " + T + ", " + B + ", " + S(km) +
           ", device=x.device, dtype=torch.float32)  # slot 0: the input; slot l + 1: layer l's output");
    l.Line(std::string("seq[0, :, :, :") + S(op.input) + "] = " +
           (op.batch_first && !op.unbatched ? "x.transpose(0, 1)" : "x"));
    const std::string state = S(op.layers * op.dirs) + ", " + B + ", " + H;
    l.Line("h0 = torch.zeros(" + state + ", device=x.device, dtype=torch.float32) if h0 is None else h0.contiguous()");
    if (lstm) {
      l.Line("c = torch.zeros(" + state + ", device=x.device, dtype=torch.float32) if c0 is None else c0.clone()"
             "  # updated in place: c_n");
    }
    l.Line("hn = torch.empty(" + state + ", device=x.device, dtype=torch.float32)");
    const std::string args =
        "(seq, wi, wh, bi, bh, h0, " + std::string(lstm ? "c" : "hn") + ", hn, " + (pre ? "gi, " : "hn, ");
    const std::string consts = ", T=" + T + ", B=" + B + ", H=" + H + ", D=" + D + ", KX=" + S(op.input) + ", KM=" +
                               S(km) + ", NB=" + S(nb) + ", BB=" + S(s.bb) + ", BJ=" + S(s.bj) + ", BK=" + S(s.bk) +
                               ", num_warps=" + S(s.warps) + ", num_stages=" + S(s.stages) + ")";
    const std::string hblocks = "triton.cdiv(" + H + ", " + S(s.bj) + ")";
    if (op.Wavefront()) {
      l.Line("grid = (" + hblocks + ", 1, " + S(op.layers * nb) + ")");
      auto loop = l.Open("for w in range(" + S(op.seq + op.layers - 1) + "):  # launch w: step w - l of layer l");
      l.Line(kname + "[grid]" + args + "w, 0" + consts);
    } else {
      l.Line("grid = (" + hblocks + ", " + D + ", " + S(nb) + ")");
      const int64_t m = op.seq * op.batch, n = op.dirs * op.gates * op.hidden;
      if (pre) {
        l.Line("gi = torch.empty(" + S(m) + ", " + S(n) + ", device=x.device, dtype=torch.float32)");
        l.Line("pgrid = (triton.cdiv(" + S(m) + ", 64), triton.cdiv(" + S(n) + ", 64))");
      }
      auto layers = l.Open("for la in range(" + L + "):");
      if (pre) {
        l.Line(projname + "[pgrid](seq, wi, bi, gi, la, M=" + S(m) + ", N=" + S(n) + ", KX=" + S(op.input) +
               ", KW=" + S(op.dirs * op.hidden) + ", KM=" + S(km) + ", BM=64, BN=64, BK=32, num_warps=4, num_stages=3)");
      }
      auto steps = l.Open("for t in range(" + T + "):");
      l.Line(kname + "[grid]" + args + "t, la" + consts);
    }
    const std::string out = "seq[" + L + ", :, :, :" + S(op.dirs * op.hidden) + "]";
    if (op.unbatched) {
      l.Line("out = " + out + ".squeeze(1).contiguous()");
      l.Line(lstm ? "return out, (hn.squeeze(1), c.squeeze(1))" : "return out, hn.squeeze(1)");
    } else {
      l.Line("out = " + (op.batch_first ? out + ".transpose(0, 1)" : out) + ".contiguous()");
      l.Line(lstm ? "return out, (hn, c)" : "return out, hn");
    }
  }
  *src += w.str() + "\n\n" + l.str() + "\n\n";
  return Status::Ok();
}

}  // namespace ax::builtin
