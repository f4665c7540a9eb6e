// Graph rewrites around reductions: reductions over size-1 dimensions made
// elementwise (SimplifyTrivialReductions) and chains of scalar arithmetic
// folded (FoldScalarChains), both reading the lowering's classification.
#include <map>
#include <set>

#include "builtin/fuse.h"
#include "builtin/reduce.h"
#include "builtin/reduce_internal.h"

namespace ax::builtin {

using json = nlohmann::json;
using namespace red;

namespace {
// The end of a graph rewrite: r without the dropped nodes, linked, as *out;
// g itself when nothing was rewritten or r does not link. Returns the count
// (0 in the latter cases).
int FinishRewrite(const Graph& g, Graph r, const std::set<std::string>& dropped, int count, Graph* out) {
  if (count == 0) {
    *out = g;
    return 0;
  }
  std::vector<Node> kept;
  for (auto& n : r.nodes) {
    if (!dropped.count(n.name)) kept.push_back(std::move(n));
  }
  r.nodes = std::move(kept);
  if (!LinkGraph(&r).ok()) {
    *out = g;
    return 0;
  }
  *out = std::move(r);
  return count;
}
}  // namespace

int SimplifyTrivialReductions(const Graph& g, Graph* out) {
  static const std::set<std::string> kKinds = {"sum",       "mean",   "amax",   "amin",       "logsumexp",
                                               "softmax",   "log_softmax", "cumsum", "cumprod"};
  Graph r;
  r.training = g.training;
  std::set<std::string> names, dropped;
  for (const auto& n : g.nodes) names.insert(n.name);
  auto fresh = [&](const std::string& base, const std::string& sfx) {
    std::string s = base + "_" + sfx;
    for (int k = 1; names.count(s); ++k) s = base + "_" + sfx + std::to_string(k);
    names.insert(s);
    return s;
  };
  int count = 0;
  for (const auto& n : g.nodes) {
    RedOp op;
    bool size_one = false;
    if (ClassifyReduction(g, n, &op, &size_one) || !size_one || !kKinds.count(op.kind) || op.input.empty()) {
      r.nodes.push_back(n);
      continue;
    }
    ++count;
    for (const auto& a : op.absorbed) dropped.insert(a);
    const Node& x = *g.Find(op.input);
    const json xin = {{"node", x.name}};
    auto ew = [&](const std::string& name, const std::string& target, const std::string& callable, json args) {
      Node e;
      e.name = name;
      e.op = "call_function";
      e.target = target;
      e.callable = callable;
      e.args = std::move(args);
      e.is_tensor = true;
      e.shape = x.shape;
      e.dtype = x.dtype;
      r.nodes.push_back(std::move(e));
    };
    const bool same = n.shape == x.shape;
    const std::string last = same ? n.name : fresh(n.name, "same");
    if (op.kind == "softmax") {
      const std::string d = fresh(n.name, "diff");
      ew(d, "sub", "operator.sub", json::array({xin, xin}));
      ew(last, "exp", "torch.exp", json::array({json{{"node", d}}}));
    } else if (op.kind == "log_softmax") {
      ew(last, "sub", "operator.sub", json::array({xin, xin}));
    } else {
      ew(last, "mul", "operator.mul", json::array({xin, json{{"repr", "1.0"}, {"value", 1.0}}}));
    }
    if (!same) {
      Node v;
      v.name = n.name;
      v.op = "call_function";
      v.target = "reshape";
      v.callable = "torch.reshape";
      json dims = json::array();
      for (int64_t d : n.shape) dims.push_back({{"repr", std::to_string(d)}, {"value", d}});
      v.args = json::array({json{{"node", last}}, json{{"tuple", dims}}});
      v.is_tensor = true;
      v.shape = n.shape;
      v.dtype = n.dtype;
      r.nodes.push_back(std::move(v));
    }
  }
  return FinishRewrite(g, std::move(r), dropped, count, out);
}

int FoldScalarChains(const Graph& g, Graph* out) {
  // A scalar operator on one tensor as x * k (mul: true) or x + k.
  struct Lin {
    std::string x;
    bool mul = true;
    double k = 0;
    bool div = false;  // x / k (kept as a division when only divisions fold)
  };
  std::map<std::string, Lin> form;
  std::set<std::string> dropped;
  Graph r;
  r.training = g.training;
  int count = 0;
  for (const auto& n : g.nodes) {
    EwOp op;
    Lin self;
    bool is_lin = false;
    if (n.op != "output" && n.kwargs.empty() && ClassifyElementwise(g, n, &op) && op.operands.size() == 2 &&
        op.params.empty()) {
      const EwOperand& a = op.operands[0];
      const EwOperand& b = op.operands[1];
      const bool ta = !a.node.empty(), tb = !b.node.empty();
      const Node* t = ta != tb ? g.Find(ta ? a.node : b.node) : nullptr;
      if (t && t->is_tensor && t->shape == n.shape && t->dtype == n.dtype) {
        const double c = ta ? b.value : a.value;
        if (op.fn == "mul") {
          self = {t->name, true, c, false};
          is_lin = true;
        } else if (op.fn == "div" && ta && c != 0.0) {
          self = {t->name, true, c, true};
          is_lin = true;
        } else if (op.fn == "add") {
          self = {t->name, false, c, false};
          is_lin = true;
        } else if (op.fn == "sub" && ta) {
          self = {t->name, false, -c, false};
          is_lin = true;
        }
      }
    }
    if (!is_lin) {
      r.nodes.push_back(n);
      continue;
    }
    auto it = form.find(self.x);
    const Node* inner = g.Find(self.x);
    if (it != form.end() && it->second.mul == self.mul && inner && inner->users.size() == 1) {
      const Lin& in = it->second;
      Lin both{in.x, self.mul, 0.0, false};
      if (!self.mul) {
        both.k = in.k + self.k;
      } else if (in.div && self.div) {
        both.k = in.k * self.k;  // (x / a) / b = x / (a * b)
        both.div = true;
      } else if (in.div) {
        both.k = self.k / in.k;  // (x / a) * b = x * (b / a)
      } else if (self.div) {
        both.k = in.k / self.k;  // (x * a) / b = x * (a / b)
      } else {
        both.k = in.k * self.k;
      }
      if (std::isfinite(both.k) && (!both.div || both.k != 0.0)) {
        ++count;
        dropped.insert(inner->name);
        Node e = n;
        e.op = "call_function";
        e.target = both.mul ? (both.div ? "truediv" : "mul") : "add";
        e.callable = both.mul ? (both.div ? "operator.truediv" : "operator.mul") : "operator.add";
        e.args = json::array({json{{"node", both.x}}, json{{"repr", PyFloat(both.k)}, {"value", both.k}}});
        e.kwargs = json::object();
        e.module = json();
        form[n.name] = both;
        r.nodes.push_back(std::move(e));
        continue;
      }
    }
    form[n.name] = self;
    r.nodes.push_back(n);
  }
  return FinishRewrite(g, std::move(r), dropped, count, out);
}

}  // namespace ax::builtin
