// Graph: the traced forward of a task (the `trace` worker op, docs/worker-protocol.md)
// as plain C++ data for the builtin compiler.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ax::builtin {

// attrs[key] when it holds a T, else dflt: a module attribute that is None in
// Python arrives as null (nn.RMSNorm's eps), and json's value() would throw.
template <typename T>
T AttrOr(const nlohmann::json& attrs, const char* key, T dflt) {
  if (!attrs.is_object()) return dflt;
  auto it = attrs.find(key);
  if (it == attrs.end() || it->is_null()) return dflt;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    return dflt;
  }
}

struct Node {
  std::string name;       // fx node name (a Python identifier)
  std::string op;         // placeholder | get_attr | call_function | call_method | call_module | output
  std::string target;     // function/method name, module path, attribute path, placeholder name
  std::string callable;   // call_function: an expression that evaluates to the function ("" if none)
  nlohmann::json args = nlohmann::json::array();
  nlohmann::json kwargs = nlohmann::json::object();
  bool is_tensor = false;  // the node's value is one tensor
  bool is_number = false;  // a placeholder whose value is a Python int or float
  std::vector<int64_t> shape;
  std::string dtype;       // "torch.float32", ...
  nlohmann::json module;   // call_module: {class, attrs, params, buffers}
  // get_attr of a tensor the forward creates (fx's _tensor_constantN): an
  // expression rebuilding it on the CPU, "" when there is none.
  bool is_constant = false;
  std::string constant_expr;
  std::optional<double> constant_value;  // a 0-d float32 constant: its value
  std::vector<int> users;  // indices of the nodes that read this one

  std::string ModuleClass() const { return module.is_object() ? module.value("class", "") : ""; }
  // The positional argument i, else the keyword argument kw, else null.
  const nlohmann::json* Arg(size_t i, const std::string& kw) const;
};

struct Graph {
  std::vector<Node> nodes;
  std::map<std::string, int> index;  // name -> position in nodes
  bool training = true;

  const Node* Find(const std::string& name) const;
};

// Parses the `graph` object of a trace reply.
Status ParseGraph(const nlohmann::json& j, Graph* out);

// Rebuilds g's name index and every node's users from the nodes' arguments
// (after nodes were replaced or removed); an error for a node that reads an
// unknown or later node, or for two nodes of one name.
Status LinkGraph(Graph* g);

// A traced constant argument as a plain value: {"value": v} -> v, a tuple or
// list of them -> an array, None -> null; false for anything else (a node).
bool PlainArg(const nlohmann::json& a, nlohmann::json* out);

// The dtypes the compiler generates kernels for: float32, float16, bfloat16.
bool IsFloatDtype(const std::string& dtype);

// The names of the nodes that an argument (json from the trace) refers to.
void CollectNodeRefs(const nlohmann::json& arg, std::vector<std::string>* out);

}  // namespace ax::builtin
