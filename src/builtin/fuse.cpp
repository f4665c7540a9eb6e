#include "builtin/fuse.h"

#include <cmath>

#include "builtin/ew_ops.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

const std::string kF32 = "torch.float32";

bool Numeric(const json* a, double* v) {
  if (!a || !a->is_object() || !a->contains("value")) return false;
  const json& x = (*a)["value"];
  if (x.is_boolean() || !x.is_number()) return false;
  *v = x.get<double>();
  return std::isfinite(*v);
}

bool IsNone(const json* a) { return a && a->is_object() && a->value("repr", "") == "None"; }

}  // namespace

bool IsDeviceOf(const Node& n) {
  return n.op == "call_function" && n.callable == "builtins.getattr" && n.args.size() == 2 &&
         n.args[0].contains("node") && n.args[1].value("repr", "") == "'device'" && n.kwargs.empty();
}

bool IsScalarConstant(const Node& n, double* value) {
  if (n.op == "get_attr" && n.is_constant && n.constant_value) {  // torch.tensor(0.5) evaluated while tracing
    *value = *n.constant_value;
    return true;
  }
  if (n.op != "call_function" || n.callable != "torch.tensor" || n.args.size() != 1 || !n.args[0].contains("value") ||
      !n.args[0]["value"].is_number() || n.args[0]["value"].is_boolean()) {
    return false;
  }
  for (const auto& [k, v] : n.kwargs.items()) {
    if (!(k == "device" || (k == "dtype" && (IsNone(&v) || v.value("repr", "") == "torch.float32")))) return false;
  }
  *value = n.args[0]["value"].get<double>();
  return true;
}

namespace {

// An operand of node n: a tensor node of n's dtype that broadcasts to n's
// shape (no mixed-dtype promotion), a number, or a number passed to forward
// (a runtime scalar). With allow_bool, also a bool tensor: loaded as 0.0 /
// 1.0, which is PyTorch's promotion of it in an arithmetic operator whose
// result is floating.
bool Operand(const Graph& g, const json* a, const Node& n, EwOperand* out, bool allow_bool = false) {
  const std::vector<int64_t>& shape = n.shape;
  if (!a || !a->is_object()) return false;
  if (a->contains("node")) {
    const Node* src = g.Find((*a)["node"].get<std::string>());
    if (src && src->is_number) {
      out->node = src->name;
      return true;
    }
    if (src && IsScalarConstant(*src, &out->value)) return true;
    if (!src || !src->is_tensor || (src->dtype != n.dtype && !(allow_bool && src->dtype == "torch.bool"))) return false;
    if (src->shape.size() > shape.size()) return false;
    for (size_t i = 0; i < src->shape.size(); ++i) {
      int64_t s = src->shape[src->shape.size() - 1 - i], o = shape[shape.size() - 1 - i];
      if (s != o && s != 1) return false;
    }
    out->node = src->name;
    return true;
  }
  return Numeric(a, &out->value);
}

// Keyword arguments other than the allowed ones make the call unsupported.
bool OnlyKwargs(const Node& n, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : n.kwargs.items()) {
    if (!allowed.count(k)) return false;
  }
  return true;
}

// An in-place operator is only safe to fuse when nothing else reads what it overwrites.
bool InplaceSafe(const Graph& g, const Node& n, bool inplace) {
  if (!inplace || n.args.empty() || !n.args[0].contains("node")) return true;
  const Node* src = g.Find(n.args[0]["node"].get<std::string>());
  if (!src || src->op == "placeholder" || src->op == "get_attr") return false;
  return src->users.size() == 1;
}

bool InplaceFlag(const Node& n, size_t pos) {
  const json* a = n.Arg(pos, "inplace");
  return a && a->is_object() && a->value("repr", "") == "True";
}

}  // namespace

bool ClassifyElementwise(const Graph& g, const Node& n, EwOp* out) {
  // Half precision too: loaded in the dtype, computed in float32, stored in
  // the dtype (rounded once per group output, where PyTorch rounds after
  // every operator).
  if (!n.is_tensor || !IsFloatDtype(n.dtype)) return false;
  EwOp op;
  std::string fn;
  const json& attrs = n.module.is_object() && n.module.contains("attrs") ? n.module["attrs"] : json::object();
  auto attr = [&](const char* k, double dflt) {
    return attrs.contains(k) && attrs[k].is_number() ? attrs[k].get<double>() : dflt;
  };
  if (n.op == "call_module") {
    const auto& kModules = EwModuleOps();
    auto it = kModules.find(n.ModuleClass());
    if (it == kModules.end() || n.args.size() != 1 || !n.kwargs.empty()) return false;
    fn = it->second;
    if (AttrOr(attrs, "inplace", false) && !InplaceSafe(g, n, true)) return false;
    if (n.ModuleClass() == "Dropout" && AttrOr(attrs, "training", true) && attr("p", 0.5) != 0.0) return false;
    EwOperand a;
    if (!Operand(g, &n.args[0], n, &a) || a.node.empty()) return false;
    op.operands.push_back(a);
    if (fn == "gelu") {
      op.variant = AttrOr<std::string>(attrs, "approximate", "none");
      if (op.variant != "none" && op.variant != "tanh") return false;
    } else if (fn == "leaky_relu") {
      op.params["negative_slope"] = attr("negative_slope", 0.01);
    } else if (fn == "elu") {
      op.params["alpha"] = attr("alpha", 1.0);
    } else if (fn == "softplus") {
      op.params["beta"] = attr("beta", 1.0);
      op.params["threshold"] = attr("threshold", 20.0);
    } else if (fn == "clamp") {
      op.params["min"] = attr("min_val", n.ModuleClass() == "ReLU6" ? 0.0 : -1.0);
      op.params["max"] = attr("max_val", n.ModuleClass() == "ReLU6" ? 6.0 : 1.0);
    }
    op.fn = fn;
    *out = op;
    return true;
  }
  if (n.op == "call_function") {
    // Only functions of torch, torch.nn.functional and operator: a user's own
    // function of the same name would be something else.
    const std::string& c = n.callable;
    if (!(c.rfind("operator.", 0) == 0 || c.rfind("torch.", 0) == 0 || c.rfind("builtins.", 0) == 0)) return false;
    if (c.rfind("torch.Tensor.", 0) == 0) return false;
  } else if (n.op != "call_method") {
    return false;
  }
  fn = n.target;
  static const std::map<std::string, std::string> kAlias = {
      {"truediv", "div"}, {"true_divide", "div"}, {"multiply", "mul"}, {"subtract", "sub"},
      {"clip", "clamp"}, {"negative", "neg"}, {"relu6", "relu6"}, {"absolute", "abs"}};
  if (auto it = kAlias.find(fn); it != kAlias.end()) fn = it->second;
  // torch.min(x, y) / torch.max(x, y) with a tensor y are elementwise (with
  // a dim they are reductions, reduce_lower.cpp).
  if ((fn == "min" || fn == "max") && n.args.size() == 2 && n.kwargs.empty() && n.args[1].contains("node")) {
    fn = fn == "min" ? "minimum" : "maximum";
  }
  static const std::set<std::string> kLosses = {"smooth_l1_loss", "huber_loss", "mse_loss", "l1_loss", "kl_div"};
  if (kLosses.count(fn)) {
    // A pointwise loss without reduction (reduced ones are lowered to this
    // plus a mean or sum, src/builtin/graph.cpp), on operands of its shape.
    if (n.op != "call_function" || n.callable != "torch.nn.functional." + fn) return false;
    if (!OnlyKwargs(n, {"size_average", "reduce", "reduction", "beta", "delta", "weight", "log_target"}) ||
        n.args.size() != 2) {
      return false;
    }
    for (const char* k : {"size_average", "reduce", "weight"}) {
      if (n.kwargs.contains(k) && !IsNone(&n.kwargs[k])) return false;
    }
    if (!n.kwargs.contains("reduction") || n.kwargs["reduction"].value("repr", "") != "'none'") return false;
    EwOperand a, b;
    if (!Operand(g, n.Arg(0, "input"), n, &a) || !Operand(g, n.Arg(1, "target"), n, &b)) return false;
    if (a.node.empty() || b.node.empty() || g.Find(a.node)->shape != n.shape || g.Find(b.node)->shape != n.shape) {
      return false;
    }
    if (n.kwargs.contains("log_target")) {
      const std::string lt = n.kwargs["log_target"].value("repr", "");
      if (fn != "kl_div" || (lt != "True" && lt != "False")) return false;
      if (lt == "True") op.variant = "log_target";
    }
    // kl_div(log(p), t): the term t * (log t - log p) is computed as
    // t * log(t / p), one logarithm instead of two (H200, 16384 x 16384
    // summed: 0.68 -> 0.51 ms, at copy bandwidth); the log node itself is
    // then read by nothing in this kernel.
    if (fn == "kl_div" && op.variant.empty()) {
      const Node* ln = g.Find(a.node);
      EwOp lo;
      if (ln && ln->is_tensor && ClassifyElementwise(g, *ln, &lo) && lo.fn == "log" && lo.operands.size() == 1 &&
          !lo.operands[0].node.empty() && g.Find(lo.operands[0].node)->shape == n.shape) {
        a = lo.operands[0];
        op.variant = "log_ratio";
      }
    }
    if (fn == "smooth_l1_loss" || fn == "huber_loss") {
      const char* k = fn == "smooth_l1_loss" ? "beta" : "delta";
      double v = 1.0;
      if (n.kwargs.contains(k) && !Numeric(&n.kwargs[k], &v)) return false;
      if (!(v > 0.0)) return false;  // beta 0 is an L1 loss in PyTorch; left to it
      op.params[k] = v;
    }
    op.operands = {a, b};
    op.fn = fn;
    *out = op;
    return true;
  }
  static const std::set<std::string> kBinary = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
  static const std::set<std::string> kUnary = {"neg", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs",
                                               "gelu", "silu", "hardswish", "hardsigmoid", "leaky_relu", "elu", "selu",
                                               "softplus", "mish", "clamp", "clamp_min", "clamp_max", "hardtanh",
                                               "relu6", "square", "reciprocal", "erf", "contiguous"};
  size_t nargs = n.args.size();
  if (kBinary.count(fn)) {
    if (!OnlyKwargs(n, {"alpha", "other", "exponent"})) return false;
    EwOperand a, b;
    const json* second = n.Arg(1, fn == "pow" ? "exponent" : "other");
    const bool bools = fn != "pow";  // the node's result is floating (checked above)
    if (!Operand(g, n.Arg(0, "input"), n, &a, bools) || !Operand(g, second, n, &b, bools)) return false;
    if (a.node.empty() && b.node.empty()) return false;
    if (fn == "pow") {
      if (!b.node.empty() || a.node.empty()) return false;
      double e = b.value;
      if (e != 2.0 && e != 3.0 && e != 0.5 && e != 1.0 && e != -1.0) return false;
      op.params["exponent"] = e;
      op.operands = {a};
    } else {
      if (n.kwargs.contains("alpha")) {
        double alpha;
        if ((fn != "add" && fn != "sub") || !Numeric(&n.kwargs["alpha"], &alpha)) return false;
        op.params["alpha"] = alpha;
      }
      op.operands = {a, b};
    }
    (void)nargs;
    op.fn = fn;
    *out = op;
    return true;
  }
  if (!kUnary.count(fn)) return false;
  EwOperand a;
  if (!Operand(g, n.Arg(0, "input"), n, &a) || a.node.empty() || g.Find(a.node)->is_number) return false;
  op.operands = {a};
  if (fn == "contiguous") {
    if (n.op != "call_method" || nargs != 1 || !n.kwargs.empty()) return false;
    fn = "identity";
  } else if (fn == "relu" || fn == "relu6" || fn == "hardswish" || fn == "hardsigmoid" || fn == "silu" ||
             fn == "mish" || fn == "selu") {
    if (!OnlyKwargs(n, {"inplace", "input"}) || nargs > 2) return false;
    if (!InplaceSafe(g, n, InplaceFlag(n, 1))) return false;
    if (fn == "relu6") {
      fn = "clamp";
      op.params["min"] = 0.0;
      op.params["max"] = 6.0;
    }
  } else if (fn == "gelu") {
    if (!OnlyKwargs(n, {"approximate", "input"}) || nargs > 2) return false;
    const json* ap = n.Arg(1, "approximate");
    op.variant = "none";
    if (ap) {
      std::string r = ap->value("repr", "");
      if (r == "'tanh'") op.variant = "tanh";
      else if (r != "'none'") return false;
    }
  } else if (fn == "leaky_relu") {
    if (!OnlyKwargs(n, {"negative_slope", "inplace", "input"}) || nargs > 3) return false;
    if (!InplaceSafe(g, n, InplaceFlag(n, 2))) return false;
    double s = 0.01;
    const json* a1 = n.Arg(1, "negative_slope");
    if (a1 && !Numeric(a1, &s)) return false;
    op.params["negative_slope"] = s;
  } else if (fn == "elu") {
    if (!OnlyKwargs(n, {"alpha", "inplace", "input"}) || nargs > 3) return false;
    if (!InplaceSafe(g, n, InplaceFlag(n, 2))) return false;
    double al = 1.0;
    const json* a1 = n.Arg(1, "alpha");
    if (a1 && !Numeric(a1, &al)) return false;
    op.params["alpha"] = al;
  } else if (fn == "softplus") {
    if (!OnlyKwargs(n, {"beta", "threshold", "input"}) || nargs > 3) return false;
    double beta = 1.0, th = 20.0;
    const json* a1 = n.Arg(1, "beta");
    const json* a2 = n.Arg(2, "threshold");
    if ((a1 && !Numeric(a1, &beta)) || (a2 && !Numeric(a2, &th))) return false;
    op.params["beta"] = beta;
    op.params["threshold"] = th;
  } else if (fn == "clamp" || fn == "hardtanh" || fn == "clamp_min" || fn == "clamp_max") {
    bool ht = fn == "hardtanh";
    if (!OnlyKwargs(n, {"min", "max", "min_val", "max_val", "inplace", "input"}) || nargs > 3) return false;
    if (ht && !InplaceSafe(g, n, InplaceFlag(n, 3))) return false;
    const json* lo = fn == "clamp_max" ? nullptr : n.Arg(1, ht ? "min_val" : "min");
    const json* hi = fn == "clamp_min" ? nullptr : n.Arg(fn == "clamp_max" ? 1 : 2, ht ? "max_val" : "max");
    double v;
    if (ht && !lo) op.params["min"] = -1.0;
    if (ht && !hi) op.params["max"] = 1.0;
    if (lo && !IsNone(lo)) {
      if (!Numeric(lo, &v)) return false;
      op.params["min"] = v;
    }
    if (hi && !IsNone(hi)) {
      if (!Numeric(hi, &v)) return false;
      op.params["max"] = v;
    }
    if (!op.params.count("min") && !op.params.count("max")) return false;
    fn = "clamp";
  } else {
    if (!OnlyKwargs(n, {"input"}) || nargs > 1) return false;
  }
  op.fn = fn;
  *out = op;
  return true;
}

int64_t Group::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::vector<Group> FormGroups(const Graph& g, const FusionOptions& opt) {
  std::vector<Group> groups;
  Group cur;
  std::map<int, int> group_of;  // node -> group index
  auto close = [&] {
    if (!cur.nodes.empty()) groups.push_back(std::move(cur));
    cur = Group();
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    double unused;
    if (n.op == "placeholder" || n.op == "get_attr" || IsDeviceOf(n) || IsScalarConstant(n, &unused)) continue;
    EwOp op;
    if (!ClassifyElementwise(g, n, &op)) {
      close();
      continue;
    }
    if (!cur.nodes.empty() && (opt.singleton || cur.shape != n.shape || cur.dtype != n.dtype)) close();
    if (cur.nodes.empty()) {
      cur.shape = n.shape;
      cur.dtype = n.dtype;
    }
    cur.nodes.push_back(static_cast<int>(i));
    cur.ops[static_cast<int>(i)] = op;
    if (opt.cuts.count(n.name)) close();
  }
  close();
  for (size_t k = 0; k < groups.size(); ++k) {
    Group& grp = groups[k];
    std::set<int> members(grp.nodes.begin(), grp.nodes.end());
    std::set<std::string> seen;
    for (int i : grp.nodes) {
      for (const auto& o : grp.ops[i].operands) {
        if (o.node.empty() || members.count(g.index.at(o.node)) || seen.count(o.node)) continue;
        seen.insert(o.node);
        grp.inputs.push_back(o.node);
      }
      for (int u : g.nodes[i].users) {
        if (!members.count(u) && !IsDeviceOf(g.nodes[u])) {
          grp.outputs.push_back(g.nodes[i].name);
          break;
        }
      }
    }
  }
  // A kernel's operand can be a node the graph does not link to it (kl_div
  // reads p in place of log(p)): the group computing it outputs it too.
  for (size_t k = 0; k < groups.size(); ++k) {
    for (const auto& in : groups[k].inputs) {
      for (size_t j = 0; j < groups.size(); ++j) {
        Group& src = groups[j];
        if (j == k || std::find(src.nodes.begin(), src.nodes.end(), g.index.at(in)) == src.nodes.end()) continue;
        if (std::find(src.outputs.begin(), src.outputs.end(), in) == src.outputs.end()) src.outputs.push_back(in);
      }
    }
  }
  // A group nothing reads is dead code: its nodes stay as they are; so does
  // one that reads no tensor (only runtime scalars).
  std::vector<Group> live;
  for (auto& grp : groups) {
    bool tensor_in = false;
    for (const auto& in : grp.inputs) tensor_in = tensor_in || g.Find(in)->is_tensor;
    if (!grp.outputs.empty() && tensor_in) live.push_back(std::move(grp));
  }
  return live;
}

}  // namespace ax::builtin
