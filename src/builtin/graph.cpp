#include "builtin/graph.h"

#include <set>

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

namespace {

// A pointwise loss with reduction 'mean' or 'sum' (F.smooth_l1_loss,
// F.huber_loss, F.mse_loss, F.l1_loss) becomes the same loss with reduction
// 'none' (an elementwise operator) followed by torch.mean / torch.sum over
// everything: the same value, and two operators the compiler generates. The
// loss node keeps its name, so its readers are unchanged.
json LowerLosses(const json& nodes) {
  static const std::set<std::string> kLosses = {"torch.nn.functional.smooth_l1_loss", "torch.nn.functional.huber_loss",
                                                "torch.nn.functional.mse_loss", "torch.nn.functional.l1_loss"};
  json out = json::array();
  std::set<std::string> names;
  for (const auto& jn : nodes) names.insert(jn.value("name", ""));
  for (const auto& jn : nodes) {
    const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
    const json& o = jn.contains("out") ? jn["out"] : json::object();
    const json kw = jn.contains("kwargs") && jn["kwargs"].is_object() ? jn["kwargs"] : json::object();
    const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
    std::string reduction = "'mean'";
    if (kw.contains("reduction")) reduction = kw["reduction"].value("repr", "");
    bool legacy = false;  // size_average / reduce (the old spelling of reduction) or a weight set
    for (const char* k : {"size_average", "reduce", "weight"}) legacy = legacy || (kw.contains(k) && kw[k].value("repr", "") != "None");
    if (jn.value("op", "") != "call_function" || !kLosses.count(callable) || args.size() != 2 || legacy ||
        (reduction != "'mean'" && reduction != "'sum'") || o.value("kind", "") != "tensor" ||
        !o.contains("shape") || !o["shape"].empty() || !args[0].contains("node") || !args[1].contains("node")) {
      out.push_back(jn);
      continue;
    }
    // The elementwise loss has its operands' shape (equal shapes only: PyTorch
    // warns when a loss broadcasts).
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& a : args) {
      for (const auto& m : out) {
        if (m.value("name", "") == a["node"].get<std::string>() && m.contains("out") &&
            m["out"].value("kind", "") == "tensor") {
          shapes.push_back(m["out"]["shape"].get<std::vector<int64_t>>());
        }
      }
    }
    if (shapes.size() != 2 || shapes[0] != shapes[1]) {
      out.push_back(jn);
      continue;
    }
    const std::string name = jn.value("name", "");
    std::string ew = name + "_elementwise";
    while (names.count(ew)) ew += "_";
    names.insert(ew);
    json e = jn;
    e["name"] = ew;
    e["kwargs"]["reduction"] = {{"repr", "'none'"}};
    e["out"] = {{"kind", "tensor"}, {"shape", shapes[0]}, {"dtype", o.value("dtype", "")}};
    json r = {{"name", name},
              {"op", "call_function"},
              {"target", reduction == "'mean'" ? "mean" : "sum"},
              {"callable", reduction == "'mean'" ? "torch.mean" : "torch.sum"},
              {"args", json::array({json{{"node", ew}}})},
              {"kwargs", json::object()},
              {"out", o}};
    out.push_back(e);
    out.push_back(r);
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
    for (const auto& jn : LowerLosses(j["nodes"])) {
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
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::vector<std::string> refs;
    for (const auto& a : g.nodes[i].args) CollectNodeRefs(a, &refs);
    for (const auto& [k, v] : g.nodes[i].kwargs.items()) CollectNodeRefs(v, &refs);
    for (const auto& r : refs) {
      auto it = g.index.find(r);
      if (it == g.index.end() || it->second >= static_cast<int>(i)) {
        return Status::Error("graph node " + g.nodes[i].name + " reads unknown or later node " + r);
      }
      auto& users = g.nodes[it->second].users;
      if (users.empty() || users.back() != static_cast<int>(i)) users.push_back(static_cast<int>(i));
    }
  }
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace ax::builtin
