#include "builtin/graph.h"

#include <cstdio>
#include <set>

#include "builtin/load_rewrite.h"
#include "builtin/reduce.h"

namespace ax::builtin {

using json = nlohmann::json;

const json* Node::Arg(size_t i, const std::string& kw) const {
  if (args.is_array() && i < args.size()) return &args[i];
  if (!kw.empty() && kwargs.is_object() && kwargs.contains(kw)) return &kwargs[kw];
  return nullptr;
}

const Node* Graph::Find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &nodes[it->second];
}

bool IsFloatDtype(const std::string& d) {
  return d == "torch.float32" || d == "torch.float16" || d == "torch.bfloat16";
}

bool PlainArg(const json& a, json* out) {
  if (a.is_object() && a.contains("value")) {
    *out = a["value"];
    return true;
  }
  const char* seq = a.is_object() && a.contains("tuple") ? "tuple" : a.is_object() && a.contains("list") ? "list" : nullptr;
  if (seq && a[seq].is_array()) {
    json arr = json::array();
    for (const auto& e : a[seq]) {
      json v;
      if (!PlainArg(e, &v)) return false;
      arr.push_back(v);
    }
    *out = arr;
    return true;
  }
  if (a.is_object() && a.value("repr", "") == "None") {
    *out = nullptr;
    return true;
  }
  return false;
}

void CollectNodeRefs(const json& arg, std::vector<std::string>* out) {
  if (!arg.is_object()) return;
  if (arg.contains("node")) {
    out->push_back(arg["node"].get<std::string>());
  } else if (arg.contains("tuple") || arg.contains("list")) {
    for (const auto& a : arg.contains("tuple") ? arg["tuple"] : arg["list"]) CollectNodeRefs(a, out);
  } else if (arg.contains("dict")) {
    for (const auto& [k, v] : arg["dict"].items()) CollectNodeRefs(v, out);
  }
}

bool TensorOf(const json& lowered, const json& arg, std::vector<int64_t>* shape, std::string* dtype) {
  if (!arg.is_object() || !arg.contains("node")) return false;
  const std::string name = arg["node"].get<std::string>();
  for (const auto& m : lowered) {
    if (m.value("name", "") == name && m.contains("out") && m["out"].value("kind", "") == "tensor") {
      *shape = m["out"]["shape"].get<std::vector<int64_t>>();
      *dtype = m["out"].value("dtype", "");
      return true;
    }
  }
  return false;
}

std::string FreshName(std::set<std::string>* names, const std::string& base, const std::string& suffix) {
  std::string n = base + "_" + suffix;
  while (names->count(n)) n += "_";
  names->insert(n);
  return n;
}

namespace {

// nn.TripletMarginLoss / F.triplet_margin_loss (p = 2, no swap) on anchor,
// positive and negative of one shape [..., D]: each distance is
// sqrt(sum((a - x + eps)^2, dim=-1)) (pairwise_distance), the loss
// clamp_min(d_ap - d_an + margin, 0), then its mean or sum; rewritten into
// those operators, which the compiler generates. The loss node keeps its name.
bool LowerTriplet(const json& jn, const json& out, std::set<std::string>* names, json* lowered) {
  const std::string op = jn.value("op", "");
  const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
  const json mod = jn.contains("module") && jn["module"].is_object() ? jn["module"] : json::object();
  const bool is_module = op == "call_module" && mod.value("class", "") == "TripletMarginLoss";
  const bool is_fn = op == "call_function" && callable == "torch.nn.functional.triplet_margin_loss";
  if (!is_module && !is_fn) return false;
  const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
  const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
  const json& o = jn.contains("out") ? jn["out"] : json::object();
  if (args.size() != 3 || o.value("kind", "") != "tensor") return false;
  for (const auto& a : args) {
    if (!a.is_object() || !a.contains("node")) return false;
  }
  double margin = 1.0, p = 2.0, eps = 1e-6;
  bool swap = false;
  std::string reduction = "mean";
  if (is_module) {
    const json at = mod.contains("attrs") ? mod["attrs"] : json::object();
    if (!kw.empty()) return false;
    margin = AttrOr(at, "margin", 1.0);
    p = AttrOr(at, "p", 2.0);
    eps = AttrOr(at, "eps", 1e-6);
    swap = AttrOr(at, "swap", false);
    reduction = AttrOr(at, "reduction", std::string("mean"));
  } else {
    for (const auto& [k, v] : kw.items()) {
      if (!v.is_object()) return false;
      if (k == "margin" || k == "p" || k == "eps") {
        if (!v.contains("value") || !v["value"].is_number()) return false;
        (k == "margin" ? margin : k == "p" ? p : eps) = v["value"].get<double>();
      } else if (k == "swap") {
        swap = v.value("repr", "") == "True";
      } else if (k == "reduction") {
        std::string r = v.value("repr", "");
        if (r.size() < 2) return false;
        reduction = r.substr(1, r.size() - 2);
      } else if (!(v.value("repr", "") == "None" && (k == "size_average" || k == "reduce"))) {
        return false;
      }
    }
  }
  if (p != 2.0 || swap || (reduction != "mean" && reduction != "sum" && reduction != "none")) return false;
  // the three operands: float32 tensors of one shape (no broadcasting)
  std::vector<int64_t> shape;
  std::string dtype;
  for (const auto& a : args) {
    std::vector<int64_t> sh;
    if (!TensorOf(out, a, &sh, &dtype) || (!shape.empty() && sh != shape)) return false;
    shape = sh;
  }
  if (shape.empty() || dtype != "torch.float32") return false;
  std::vector<int64_t> rows(shape.begin(), shape.end() - 1);
  const std::string name = jn.value("name", "");
  auto fresh = [&](const std::string& suffix) { return FreshName(names, name, suffix); };
  auto T = [&](const std::vector<int64_t>& sh) { return json{{"kind", "tensor"}, {"shape", sh}, {"dtype", dtype}}; };
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string r = buf;
    if (r.find_first_of(".eEn") == std::string::npos) r += ".0";
    return json{{"repr", r}, {"value", v}};
  };
  auto call = [&](const std::string& n, const std::string& target, const std::string& fn, json a, json k,
                  const std::vector<int64_t>& sh) {
    lowered->push_back({{"name", n}, {"op", "call_function"}, {"target", target}, {"callable", fn}, {"args", a},
                        {"kwargs", k}, {"out", T(sh)}});
  };
  std::string dist[2];
  for (int k = 0; k < 2; ++k) {
    const std::string sfx = k == 0 ? "ap" : "an";
    const std::string diff = fresh(sfx + "_diff"), shifted = fresh(sfx + "_eps"), sq = fresh(sfx + "_sq"),
                      sum = fresh(sfx + "_sum");
    dist[k] = fresh(sfx + "_dist");
    call(diff, "sub", "operator.sub", json::array({args[0], args[k + 1]}), json::object(), shape);
    call(shifted, "add", "operator.add", json::array({json{{"node", diff}}, num(eps)}), json::object(), shape);
    call(sq, "mul", "operator.mul", json::array({json{{"node", shifted}}, json{{"node", shifted}}}), json::object(),
         shape);
    call(sum, "sum", "torch.sum", json::array({json{{"node", sq}}}), json{{"dim", json{{"repr", "-1"}, {"value", -1}}}}, rows);
    call(dist[k], "sqrt", "torch.sqrt", json::array({json{{"node", sum}}}), json::object(), rows);
  }
  const std::string gap = fresh("gap"), shifted = fresh("margin");
  const std::string loss = reduction == "none" ? name : fresh("elementwise");
  call(gap, "sub", "operator.sub", json::array({json{{"node", dist[0]}}, json{{"node", dist[1]}}}), json::object(),
       rows);
  call(shifted, "add", "operator.add", json::array({json{{"node", gap}}, num(margin)}), json::object(), rows);
  call(loss, "clamp_min", "torch.clamp_min", json::array({json{{"node", shifted}}, num(0.0)}), json::object(), rows);
  if (reduction != "none") {
    lowered->push_back({{"name", name},
                        {"op", "call_function"},
                        {"target", reduction},
                        {"callable", "torch." + reduction},
                        {"args", json::array({json{{"node", loss}}})},
                        {"kwargs", json::object()},
                        {"out", o}});
  }
  return true;
}

// F.cross_entropy(x, t) or nn.CrossEntropyLoss with class indices (x [B, C] float32, t [B] int64;
// no weight or label smoothing; reduction mean or sum): per row
// logsumexp(x_b) - x_b[t_b], rows whose target is ignore_index left out (and
// not counted by the mean). Rewritten into one F.cross_entropy node with its
// settings as keywords, which the compiler generates as one reduction (one
// read of x). The loss node keeps its name.
bool LowerCrossEntropy(const json& jn, const json& out, json* lowered) {
  const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
  const json mod = jn.contains("module") && jn["module"].is_object() ? jn["module"] : json::object();
  const bool as_module = jn.value("op", "") == "call_module" && mod.value("class", "") == "CrossEntropyLoss";
  if (!as_module && (jn.value("op", "") != "call_function" || callable != "torch.nn.functional.cross_entropy")) {
    return false;
  }
  const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
  const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
  const json& o = jn.contains("out") ? jn["out"] : json::object();
  if (args.size() != 2 || !args[0].contains("node") || !args[1].contains("node") || o.value("kind", "") != "tensor") {
    return false;
  }
  std::string reduction = "mean";
  int64_t ignore = -100;
  if (as_module) {
    // nn.CrossEntropyLoss: its settings are the module's attributes (a class
    // weight is a buffer, and then the module stays a PyTorch call)
    const json at = mod.contains("attrs") && mod["attrs"].is_object() ? mod["attrs"] : json::object();
    const json bufs = mod.contains("buffers") && mod["buffers"].is_object() ? mod["buffers"] : json::object();
    if (!kw.empty() || bufs.contains("weight") || !at.contains("reduction") || !at["reduction"].is_string() ||
        !at.contains("ignore_index") || !at["ignore_index"].is_number_integer() ||
        !at.contains("label_smoothing") || !at["label_smoothing"].is_number() ||
        at["label_smoothing"].get<double>() != 0.0) {
      return false;
    }
    reduction = at["reduction"].get<std::string>();
    if (reduction != "mean" && reduction != "sum") return false;
    ignore = at["ignore_index"].get<int64_t>();
  }
  for (const auto& [k, v] : kw.items()) {
    if (!v.is_object()) return false;
    const std::string r = v.value("repr", "");
    if (k == "reduction") {
      if (r != "'mean'" && r != "'sum'") return false;
      reduction = r.substr(1, r.size() - 2);
    } else if (k == "ignore_index") {
      if (!v.contains("value") || !v["value"].is_number_integer()) return false;
      ignore = v["value"].get<int64_t>();
    } else if (k == "label_smoothing") {
      if (!v.contains("value") || !v["value"].is_number() || v["value"].get<double>() != 0.0) return false;
    } else if (!((k == "weight" || k == "size_average" || k == "reduce") && r == "None")) {
      return false;
    }
  }
  std::vector<int64_t> xs, ts;
  std::string xd, td;
  if (!TensorOf(out, args[0], &xs, &xd) || !TensorOf(out, args[1], &ts, &td)) return false;
  if (xs.size() != 2 || ts.size() != 1 || xs[0] != ts[0] || xd != "torch.float32" || td != "torch.int64") return false;
  const std::string name = jn.value("name", "");
  auto I = [](int64_t v) { return json{{"repr", std::to_string(v)}, {"value", v}}; };
  // One node, the functional form with its settings spelled out: the
  // compiler generates it as one reduction (ClassifyReduction's "xent"), and
  // a plan that leaves reductions to PyTorch calls F.cross_entropy itself.
  lowered->push_back({{"name", name},
                      {"op", "call_function"},
                      {"target", "cross_entropy"},
                      {"callable", "torch.nn.functional.cross_entropy"},
                      {"args", json::array({args[0], args[1]})},
                      {"kwargs", {{"reduction", {{"repr", "'" + reduction + "'"}}}, {"ignore_index", I(ignore)}}},
                      {"out", o}});
  return true;
}

// Adaptive average pooling to size 1 (nn.AdaptiveAvgPool{1,2,3}d or
// F.adaptive_avg_pool{1,2,3}d with output size 1 in every pooled dimension) is
// the mean over the last d dimensions, kept as size 1: rewritten into
// torch.mean(x, dim=(-d, ..., -1), keepdim=True), which the compiler generates
// (with the elementwise work before it as its prologue). The node keeps its name.
bool LowerGlobalAvgPool(const json& jn, const json& out, json* lowered) {
  const std::string op = jn.value("op", "");
  const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
  const json mod = jn.contains("module") && jn["module"].is_object() ? jn["module"] : json::object();
  const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
  const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
  int d = 0;
  json size;  // the output size: an int, or a list of ints (module attrs / tuple or list args)
  for (int k = 1; k <= 3; ++k) {
    const std::string sfx = std::to_string(k) + "d";
    if (op == "call_module" && mod.value("class", "") == "AdaptiveAvgPool" + sfx && args.size() == 1 && kw.empty()) {
      d = k;
      const json at = mod.contains("attrs") ? mod["attrs"] : json::object();
      if (at.contains("output_size")) size = at["output_size"];
    } else if (op == "call_function" && (callable == "torch.nn.functional.adaptive_avg_pool" + sfx ||
                                         callable == "torch.adaptive_avg_pool" + sfx)) {  // 1d is torch's own
      d = k;
      const json* a = args.size() == 2 && kw.empty() ? &args[1]
                      : args.size() == 1 && kw.size() == 1 && kw.contains("output_size") ? &kw["output_size"]
                                                                                      : nullptr;
      if (!a || !a->is_object()) return false;
      if (a->contains("value")) {
        size = (*a)["value"];
      } else if (a->contains("tuple") || a->contains("list")) {
        size = json::array();
        for (const auto& x : a->contains("tuple") ? (*a)["tuple"] : (*a)["list"]) {
          if (!x.is_object() || !x.contains("value")) return false;
          size.push_back(x["value"]);
        }
      }
    }
  }
  if (d == 0 || args.empty() || !args[0].is_object() || !args[0].contains("node")) return false;
  auto one = [](const json& v) { return v.is_number_integer() && v.get<int64_t>() == 1; };
  bool ones = one(size);
  if (size.is_array()) {
    ones = size.size() == static_cast<size_t>(d);
    for (const auto& v : size) ones = ones && one(v);
  }
  const json& o = jn.contains("out") ? jn["out"] : json::object();
  std::vector<int64_t> xs;
  std::string dt;
  if (!ones || !TensorOf(out, args[0], &xs, &dt) || dt != "torch.float32" || o.value("kind", "") != "tensor") return false;
  if (xs.size() != static_cast<size_t>(d) + 1 && xs.size() != static_cast<size_t>(d) + 2) return false;
  json dims = json::array();
  for (int k = d; k >= 1; --k) dims.push_back({{"repr", std::to_string(-k)}, {"value", -k}});
  lowered->push_back({{"name", jn.value("name", "")},
                      {"op", "call_function"},
                      {"target", "mean"},
                      {"callable", "torch.mean"},
                      {"args", json::array({args[0]})},
                      {"kwargs", {{"dim", {{"tuple", dims}}}, {"keepdim", {{"repr", "True"}, {"value", true}}}}},
                      {"out", o}});
  return true;
}

// nn.BatchNorm{1,2,3}d in evaluation mode with running statistics: the
// per-channel affine map (x - running_mean) * rsqrt(running_var + eps)
// [* weight] [+ bias], written as elementwise operators on the module's
// buffers and parameters viewed as [C, 1, ...] (read each call, so later
// changes to them are honoured). The compiler fuses it with its neighbours.
// The last node keeps the norm's name. The per-channel work, which reads no
// input, goes to `front` (LowerAtLoad puts it after the inputs), so it does
// not split the elementwise kernel around the norm.
bool LowerEvalBatchNorm(const json& jn, const json& out, std::set<std::string>* names, json* lowered, json* front) {
  if (jn.value("op", "") != "call_module") return false;
  const json mod = jn.contains("module") && jn["module"].is_object() ? jn["module"] : json::object();
  const std::string cls = mod.value("class", "");
  if (cls != "BatchNorm1d" && cls != "BatchNorm2d" && cls != "BatchNorm3d") return false;
  const json at = mod.contains("attrs") && mod["attrs"].is_object() ? mod["attrs"] : json::object();
  const json bufs = mod.contains("buffers") && mod["buffers"].is_object() ? mod["buffers"] : json::object();
  const json prms = mod.contains("params") && mod["params"].is_object() ? mod["params"] : json::object();
  if (AttrOr(at, "training", true) || !bufs.contains("running_mean") || !bufs.contains("running_var")) return false;
  if (!at.contains("eps") || !at["eps"].is_number()) return false;
  const double eps = at["eps"].get<double>();
  const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
  const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
  const json& o = jn.contains("out") ? jn["out"] : json::object();
  std::vector<int64_t> xs;
  std::string dt;
  if (args.size() != 1 || !kw.empty() || !TensorOf(out, args[0], &xs, &dt) || dt != "torch.float32" ||
      o.value("kind", "") != "tensor" || xs.size() < 2) {
    return false;
  }
  const int64_t C = xs[1];
  auto f32_of = [&](const json& group, const char* key) {
    return group.contains(key) && group[key].value("dtype", "") == "torch.float32" &&
           group[key].value("shape", std::vector<int64_t>{}) == std::vector<int64_t>{C};
  };
  if (!f32_of(bufs, "running_mean") || !f32_of(bufs, "running_var")) return false;
  const bool has_w = prms.contains("weight"), has_b = prms.contains("bias");
  if ((has_w && !f32_of(prms, "weight")) || (has_b && !f32_of(prms, "bias"))) return false;
  const std::string name = jn.value("name", ""), target = jn.value("target", "");
  if (target.empty()) return false;
  std::vector<int64_t> cs = {C};  // [C, 1, ...]: broadcast over the dims after the channel
  cs.resize(xs.size() - 1, 1);
  auto T = [](const std::vector<int64_t>& sh) {
    return json{{"kind", "tensor"}, {"shape", sh}, {"dtype", "torch.float32"}};
  };
  auto N = [](const std::string& n) { return json{{"node", n}}; };
  json pre = json::array(), main = json::array();  // per-channel nodes; nodes of the input's shape
  auto node = [&](const std::string& n, const std::string& op, const std::string& tgt, const std::string& fn, json a,
                  json outj) {
    json j = {{"name", n}, {"op", op}, {"target", tgt}, {"args", a}, {"kwargs", json::object()}, {"out", outj}};
    if (!fn.empty()) j["callable"] = fn;
    (j["out"]["shape"] == json(xs) ? main : pre).push_back(j);
  };
  // a [C] tensor of the module viewed as [C, 1, ...]: its node's name
  auto per_channel = [&](const std::string& attr) {
    const std::string raw = FreshName(names, name, attr), viewed = FreshName(names, name, attr + "_c");
    node(raw, "get_attr", target + "." + attr, "", json::array(), T({C}));
    json a = json::array({N(raw)});
    for (int64_t v : cs) a.push_back({{"repr", std::to_string(v)}, {"value", v}});
    node(viewed, "call_method", "view", "", a, T(cs));
    return viewed;
  };
  const std::string mean = per_channel("running_mean"), var = per_channel("running_var");
  const std::string veps = FreshName(names, name, "var_eps"), inv = FreshName(names, name, "invstd"),
                    cen = FreshName(names, name, "centred");
  node(veps, "call_function", "add", "operator.add", json::array({N(var), {{"repr", PyFloat(eps)}, {"value", eps}}}),
       T(cs));
  node(inv, "call_function", "rsqrt", "torch.rsqrt", json::array({N(veps)}), T(cs));
  node(cen, "call_function", "sub", "operator.sub", json::array({args[0], N(mean)}), T(xs));
  std::string cur = cen;
  auto step = [&](const std::string& fn, const std::string& callable, const std::string& other, bool last) {
    const std::string n = last ? name : FreshName(names, name, fn == "mul" ? "scaled" : "shifted");
    node(n, "call_function", fn, callable, json::array({N(cur), N(other)}), last ? o : T(xs));
    cur = n;
  };
  step("mul", "operator.mul", inv, !has_w && !has_b);
  if (has_w) step("mul", "operator.mul", per_channel("weight"), !has_b);
  if (has_b) step("add", "operator.add", per_channel("bias"), true);
  for (auto& j : pre) front->push_back(std::move(j));
  for (auto& j : main) lowered->push_back(std::move(j));
  return true;
}

// torch.norm(x, p=2, dim=d[, keepdim]) over explicit dimensions of a float32
// x: sqrt(sum(x * x, d)), a sum the compiler generates (with x * x inside
// its kernel, and whatever reads the norm after it); the norm node keeps
// its name. Measured alone it is slower than PyTorch's norm kernel (H200,
// [32768, 65535]: 6.43 against 6.06 ms with the division after it), so it
// pays only where the search finds it a split-row kernel with an epilogue.
bool LowerNorm(const json& jn, const json& out, std::set<std::string>* names, json* lowered) {
  const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
  if (jn.value("op", "") != "call_function" || (callable != "torch.functional.norm" && callable != "torch.norm")) {
    return false;
  }
  const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
  const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
  const json& o = jn.contains("out") ? jn["out"] : json::object();
  if (args.size() != 1 || !args[0].is_object() || !args[0].contains("node") || o.value("kind", "") != "tensor") {
    return false;
  }
  json dim, keepdim = {{"repr", "False"}, {"value", false}};
  for (const auto& [k, v] : kw.items()) {
    if (!v.is_object()) return false;
    if (k == "p") {
      if (!v.contains("value") || !v["value"].is_number() || v["value"].get<double>() != 2.0) return false;
    } else if (k == "dim") {
      dim = v;
    } else if (k == "keepdim") {
      if (v.value("repr", "") != "True" && v.value("repr", "") != "False") return false;
      keepdim = v;
    } else if ((k == "out" || k == "dtype") && v.value("repr", "") == "None") {
    } else {
      return false;
    }
  }
  if (!kw.contains("p") || dim.is_null() || dim.value("repr", "None") == "None") return false;
  std::vector<int64_t> shape;
  std::string dtype;
  if (!TensorOf(out, args[0], &shape, &dtype) || dtype != "torch.float32" || shape.empty()) return false;
  const std::string name = jn.value("name", "");
  const std::string sq = FreshName(names, name, "sq"), sum = FreshName(names, name, "sumsq");
  const json T = {{"kind", "tensor"}, {"shape", shape}, {"dtype", dtype}};
  lowered->push_back({{"name", sq}, {"op", "call_function"}, {"target", "mul"}, {"callable", "operator.mul"},
                      {"args", json::array({args[0], args[0]})}, {"kwargs", json::object()}, {"out", T}});
  lowered->push_back({{"name", sum}, {"op", "call_function"}, {"target", "sum"}, {"callable", "torch.sum"},
                      {"args", json::array({json{{"node", sq}}})}, {"kwargs", {{"dim", dim}, {"keepdim", keepdim}}},
                      {"out", o}});
  lowered->push_back({{"name", name}, {"op", "call_function"}, {"target", "sqrt"}, {"callable", "torch.sqrt"},
                      {"args", json::array({json{{"node", sum}}})}, {"kwargs", json::object()}, {"out", o}});
  return true;
}

// A pointwise loss with reduction 'mean' or 'sum' (F.smooth_l1_loss,
// F.huber_loss, F.mse_loss, F.l1_loss, F.kl_div; kl_div also 'batchmean')
// becomes the same loss with reduction 'none' (an elementwise operator)
// followed by torch.mean / torch.sum over everything (for 'batchmean', a sum
// divided by the batch size): the same value, and operators the compiler
// generates. The loss node keeps its name, so its readers are unchanged.
// LowerAtLoad applies every rewrite of this file, node by node, in order.
json LowerAtLoad(const json& nodes) {
  static const std::set<std::string> kLosses = {"torch.nn.functional.smooth_l1_loss", "torch.nn.functional.huber_loss",
                                                "torch.nn.functional.mse_loss", "torch.nn.functional.l1_loss",
                                                "torch.nn.functional.kl_div"};
  json out = json::array(), front = json::array();
  std::set<std::string> names;
  for (const auto& jn : nodes) names.insert(jn.value("name", ""));
  for (const auto& jn : nodes) {
    json tri = json::array();
    if (LowerTriplet(jn, out, &names, &tri) || LowerCrossEntropy(jn, out, &tri) ||
        LowerGlobalAvgPool(jn, out, &tri) || LowerEvalBatchNorm(jn, out, &names, &tri, &front) ||
        LowerNorm(jn, out, &names, &tri) || LowerEinsum(jn, out, &names, &tri)) {
      for (auto& t : tri) out.push_back(std::move(t));
      continue;
    }
    const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
    const json& o = jn.contains("out") ? jn["out"] : json::object();
    const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
    const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
    std::string reduction = "'mean'";
    if (kw.contains("reduction")) reduction = kw["reduction"].value("repr", "");
    bool legacy = false;  // size_average / reduce (the old spelling of reduction) or a weight set
    for (const char* k : {"size_average", "reduce", "weight"}) legacy = legacy || (kw.contains(k) && kw[k].value("repr", "") != "None");
    if (jn.value("op", "") != "call_function" || !kLosses.count(callable) || args.size() != 2 || legacy ||
        (reduction != "'mean'" && reduction != "'sum'" &&
         !(reduction == "'batchmean'" && callable == "torch.nn.functional.kl_div")) ||
        o.value("kind", "") != "tensor" ||
        !o.contains("shape") || !o["shape"].empty() || !args[0].contains("node") || !args[1].contains("node")) {
      out.push_back(jn);
      continue;
    }
    // The elementwise loss has its operands' shape (equal shapes only: PyTorch
    // warns when a loss broadcasts).
    std::vector<int64_t> sa, sb;
    std::string da, db;
    if (!TensorOf(out, args[0], &sa, &da) || !TensorOf(out, args[1], &sb, &db) || sa != sb ||
        (reduction == "'batchmean'" && sa.empty())) {
      out.push_back(jn);
      continue;
    }
    const std::string name = jn.value("name", "");
    const std::string ew = FreshName(&names, name, "elementwise");
    json e = jn;
    e["name"] = ew;
    e["kwargs"]["reduction"] = {{"repr", "'none'"}};
    e["out"] = {{"kind", "tensor"}, {"shape", sa}, {"dtype", o.value("dtype", "")}};
    // kl_div's 'batchmean': the sum over everything divided by the batch size
    const bool batchmean = reduction == "'batchmean'";
    const std::string total = batchmean ? FreshName(&names, name, "total") : name;
    json r = {{"name", total},
              {"op", "call_function"},
              {"target", reduction == "'mean'" ? "mean" : "sum"},
              {"callable", reduction == "'mean'" ? "torch.mean" : "torch.sum"},
              {"args", json::array({json{{"node", ew}}})},
              {"kwargs", json::object()},
              {"out", o}};
    out.push_back(e);
    out.push_back(r);
    if (batchmean) {
      const int64_t b = sa[0];
      out.push_back({{"name", name},
                     {"op", "call_function"},
                     {"target", "truediv"},
                     {"callable", "operator.truediv"},
                     {"args", json::array({json{{"node", total}}, json{{"repr", std::to_string(b)}, {"value", b}}})},
                     {"kwargs", json::object()},
                     {"out", o}});
    }
  }
  if (!front.empty()) {  // after the inputs
    json all = json::array();
    size_t at = 0;
    while (at < out.size() && out[at].value("op", "") == "placeholder") all.push_back(out[at++]);
    for (auto& j : front) all.push_back(std::move(j));
    for (; at < out.size(); ++at) all.push_back(std::move(out[at]));
    out = std::move(all);
  }
  return out;
}

}  // namespace

Status ParseGraph(const json& j, Graph* out) {
  Graph g;
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
    return Status::Error("graph has no nodes");
  }
  g.training = j.value("training", true);
  try {
    for (const auto& jn : LowerAtLoad(j["nodes"])) {
      Node n;
      n.name = jn.at("name").get<std::string>();
      n.op = jn.at("op").get<std::string>();
      n.target = jn.value("target", "");
      if (jn.contains("callable") && jn["callable"].is_string()) n.callable = jn["callable"].get<std::string>();
      if (jn.contains("args")) n.args = jn["args"];
      if (jn.contains("kwargs")) n.kwargs = jn["kwargs"];
      if (jn.contains("module")) n.module = jn["module"];
      if (jn.contains("constant")) {
        n.is_constant = true;
        if (jn["constant"].is_string()) n.constant_expr = jn["constant"].get<std::string>();
        if (jn.contains("constant_value") && jn["constant_value"].is_number()) {
          n.constant_value = jn["constant_value"].get<double>();
        }
      }
      const json& o = jn.contains("out") ? jn["out"] : json::object();
      if (o.value("kind", "") == "number" && n.op == "placeholder") n.is_number = true;
      if (o.value("kind", "") == "tensor") {
        n.is_tensor = true;
        n.shape = o.at("shape").get<std::vector<int64_t>>();
        n.dtype = o.value("dtype", "");
      }
      if (g.index.count(n.name)) return Status::Error("graph has two nodes named " + n.name);
      g.index[n.name] = static_cast<int>(g.nodes.size());
      g.nodes.push_back(std::move(n));
    }
  } catch (const std::exception& e) {
    return Status::Error(std::string("malformed graph: ") + e.what());
  }
  Status st = LinkGraph(&g);
  if (!st.ok()) return st;
  *out = std::move(g);
  return Status::Ok();
}

Status LinkGraph(Graph* g) {
  g->index.clear();
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    g->nodes[i].users.clear();
    if (!g->index.emplace(g->nodes[i].name, static_cast<int>(i)).second) {
      return Status::Error("graph has two nodes named " + g->nodes[i].name);
    }
  }
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    std::vector<std::string> refs;
    for (const auto& a : g->nodes[i].args) CollectNodeRefs(a, &refs);
    for (const auto& [k, v] : g->nodes[i].kwargs.items()) CollectNodeRefs(v, &refs);
    for (const auto& r : refs) {
      auto it = g->index.find(r);
      if (it == g->index.end() || it->second >= static_cast<int>(i)) {
        return Status::Error("graph node " + g->nodes[i].name + " reads unknown or later node " + r);
      }
      auto& users = g->nodes[it->second].users;
      if (users.empty() || users.back() != static_cast<int>(i)) users.push_back(static_cast<int>(i));
    }
  }
  return Status::Ok();
}

}  // namespace ax::builtin
