// Lowering of reductions: a traced node to its RedOp (kind, geometry, and
// the pooling and norm parameters), and the argument readers it shares with
// the rewrites (reduce_internal.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "builtin/reduce.h"
#include "builtin/reduce_internal.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace red {

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

}  // namespace red

using namespace red;

namespace {

int64_t Prod(const std::vector<int64_t>& s, size_t a, size_t b) {
  int64_t p = 1;
  for (size_t i = a; i < b; ++i) p *= s[i];
  return p;
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

}  // namespace

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

}  // namespace ax::builtin
