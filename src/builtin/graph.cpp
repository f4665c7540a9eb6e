#include "builtin/graph.h"

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

Status ParseGraph(const json& j, Graph* out) {
  Graph g;
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
    return Status::Error("graph has no nodes");
  }
  g.training = j.value("training", true);
  try {
    for (const auto& jn : j["nodes"]) {
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
      }
      const json& o = jn.contains("out") ? jn["out"] : json::object();
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
