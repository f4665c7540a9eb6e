// torch.einsum of two operands as a (batched) matrix product: load_rewrite.h.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "builtin/load_rewrite.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

// The equation of an einsum node: its first argument, a string constant
// ('ij,jk->ik', traced as its repr).
bool EquationOf(const json& arg, std::string* eq) {
  if (!arg.is_object()) return false;
  if (arg.contains("value") && arg["value"].is_string()) {
    *eq = arg["value"].get<std::string>();
    return true;
  }
  if (!arg.contains("repr") || !arg["repr"].is_string()) return false;
  const std::string r = arg["repr"].get<std::string>();
  if (r.size() < 2 || (r.front() != '\'' && r.front() != '"') || r.back() != r.front()) return false;
  *eq = r.substr(1, r.size() - 2);
  return true;
}

// "ab,bc->ac" without spaces into its operands' and output's letters; false
// for an implicit output, an ellipsis, or a letter twice in one term.
bool ParseEquation(std::string eq, std::string* a, std::string* b, std::string* o) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->"), comma = eq.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) return false;
  *a = eq.substr(0, comma);
  *b = eq.substr(comma + 1, arrow - comma - 1);
  *o = eq.substr(arrow + 2);
  for (const std::string* t : {a, b, o}) {
    std::string seen;
    for (char c : *t) {
      if (!std::isalpha(static_cast<unsigned char>(c)) || seen.find(c) != std::string::npos) return false;
      seen += c;
    }
  }
  return !a->empty() && !b->empty();
}

json Int(int64_t v) { return {{"repr", std::to_string(v)}, {"value", v}}; }
json Tensor(const std::vector<int64_t>& shape) {
  return {{"kind", "tensor"}, {"shape", shape}, {"dtype", "torch.float32"}};
}

}  // namespace

bool LowerEinsum(const json& jn, const json& out, std::set<std::string>* names, json* lowered) {
  const std::string callable = jn.contains("callable") && jn["callable"].is_string() ? jn["callable"].get<std::string>() : "";
  if (jn.value("op", "") != "call_function" || (callable != "torch.einsum" && callable != "torch.functional.einsum")) {
    return false;
  }
  const json args = jn.contains("args") && jn["args"].is_array() ? jn["args"] : json::array();
  const json& o = jn.contains("out") ? jn["out"] : json::object();
  if (args.size() != 3 || (jn.contains("kwargs") && !jn["kwargs"].empty()) || o.value("kind", "") != "tensor" ||
      o.value("dtype", "") != "torch.float32") {
    return false;
  }
  std::string eq, ta, tb, to;
  std::vector<int64_t> sa, sb;
  std::string da, db;
  if (!EquationOf(args[0], &eq) || !ParseEquation(eq, &ta, &tb, &to) || !TensorOf(out, args[1], &sa, &da) ||
      !TensorOf(out, args[2], &sb, &db) || da != "torch.float32" || db != "torch.float32" ||
      sa.size() != ta.size() || sb.size() != tb.size()) {
    return false;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ta.size(); ++i) size[ta[i]] = sa[i];
  for (size_t i = 0; i < tb.size(); ++i) {
    if (size.count(tb[i]) && size[tb[i]] != sb[i]) return false;  // a broadcast index: left to PyTorch
    size[tb[i]] = sb[i];
  }
  // Each index: batch (both operands and the output), m (a and the output),
  // n (b and the output) or k (both operands, summed).
  std::string batch, m, n, k;
  auto in = [](const std::string& t, char c) { return t.find(c) != std::string::npos; };
  for (char c : to) {
    if (!size.count(c)) return false;
    (in(ta, c) && in(tb, c) ? batch : in(ta, c) ? m : n) += c;
  }
  for (char c : ta) {
    if (!in(to, c) && !in(tb, c)) return false;  // summed over a alone
    if (!in(to, c)) k += c;
  }
  for (char c : tb) {
    if (!in(to, c) && !in(ta, c)) return false;
  }
  // outer products and matrix-vector products (no contracted, or no free
  // index on one side) stay PyTorch's: a GEMM tile would be mostly empty
  if (m.empty() || n.empty() || k.empty()) return false;
  auto prod = [&](const std::string& t) {
    int64_t p = 1;
    for (char c : t) p *= size[c];
    return p;
  };
  auto shape_of = [&](const std::string& t) {
    std::vector<int64_t> s;
    for (char c : t) s.push_back(size[c]);
    return s;
  };
  if (shape_of(to) != o.value("shape", std::vector<int64_t>{})) return false;
  for (const auto& [c, v] : size) {
    if (v <= 0) return false;
  }
  const std::string name = jn.value("name", "");
  // Each operand to `order`, then to `shape` (nodes only where they change something).
  auto arrange = [&](const json& arg, const std::string& from, const std::string& order,
                     const std::vector<int64_t>& shape, const std::string& what) {
    json cur = arg;
    if (from != order) {
      json a = json::array({cur});
      for (char c : order) a.push_back(Int(static_cast<int64_t>(from.find(c))));
      const std::string p = FreshName(names, name, what + "_permuted");
      lowered->push_back({{"name", p}, {"op", "call_method"}, {"target", "permute"}, {"args", a},
                          {"kwargs", json::object()}, {"out", Tensor(shape_of(order))}});
      cur = {{"node", p}};
    }
    if (shape_of(order) != shape) {
      json a = json::array({cur});
      for (int64_t v : shape) a.push_back(Int(v));
      const std::string r = FreshName(names, name, what + "_matrix");
      lowered->push_back({{"name", r}, {"op", "call_method"}, {"target", "reshape"}, {"args", a},
                          {"kwargs", json::object()}, {"out", Tensor(shape)}});
      cur = {{"node", r}};
    }
    return cur;
  };
  const bool batched = !batch.empty();
  const int64_t B = prod(batch), M = prod(m), N = prod(n), K = prod(k);
  std::vector<int64_t> as = {M, K}, bs = {K, N}, cs = {M, N};
  if (batched) {
    as.insert(as.begin(), B);
    bs.insert(bs.begin(), B);
    cs.insert(cs.begin(), B);
  }
  const json x = arrange(args[1], ta, batch + m + k, as, "a");
  const json y = arrange(args[2], tb, batch + k + n, bs, "b");
  // The product, then the output's shape and index order.
  const std::string natural = batch + m + n;
  const bool reshaped = shape_of(natural) != cs, permuted = natural != to;
  const std::string c = reshaped || permuted ? FreshName(names, name, "product") : name;
  lowered->push_back({{"name", c},
                      {"op", "call_function"},
                      {"target", batched ? "bmm" : "matmul"},
                      {"callable", batched ? "torch.bmm" : "torch.matmul"},
                      {"args", json::array({x, y})},
                      {"kwargs", json::object()},
                      {"out", reshaped || permuted ? Tensor(cs) : o}});
  std::string cur = c;
  if (reshaped) {
    json a = json::array({json{{"node", cur}}});
    for (int64_t v : shape_of(natural)) a.push_back(Int(v));
    const std::string r = permuted ? FreshName(names, name, "unflattened") : name;
    lowered->push_back({{"name", r}, {"op", "call_method"}, {"target", "reshape"}, {"args", a},
                        {"kwargs", json::object()}, {"out", permuted ? Tensor(shape_of(natural)) : o}});
    cur = r;
  }
  if (permuted) {
    json a = json::array({json{{"node", cur}}});
    for (char ch : to) a.push_back(Int(static_cast<int64_t>(natural.find(ch))));
    lowered->push_back({{"name", name}, {"op", "call_method"}, {"target", "permute"}, {"args", a},
                        {"kwargs", json::object()}, {"out", o}});
  }
  return true;
}

}  // namespace ax::builtin
