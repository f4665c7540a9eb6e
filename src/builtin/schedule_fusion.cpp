#include "builtin/schedule_fusion.h"

#include <algorithm>

namespace ax::builtin {

// For each group, the norms it applies itself: a norm whose readers are all
// in one group of the norm's shape. *fed gets the norm nodes.
std::vector<std::map<size_t, NormFeed>> FormFeeds(const Graph& g, const std::vector<Group>& groups,
                                                  const std::vector<std::pair<int, RedOp>>& reds, std::set<int>* fed) {
  std::vector<std::map<size_t, NormFeed>> feeds(groups.size());
  std::map<int, size_t> group_of;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int idx : groups[k].nodes) group_of[idx] = k;
  }
  for (size_t k = 0; k < reds.size(); ++k) {
    const auto& [ni, op] = reds[k];
    const Node& n = g.nodes[ni];
    if (op.kind != "norm" || n.users.empty() || !group_of.count(n.users[0])) continue;
    const size_t j = group_of.at(n.users[0]);
    bool all_in = true;
    for (int u : n.users) all_in = all_in && group_of.count(u) && group_of.at(u) == j;
    auto pos = std::find(groups[j].inputs.begin(), groups[j].inputs.end(), n.name);
    if (!all_in || pos == groups[j].inputs.end() || groups[j].shape != op.in_shape) continue;
    feeds[j][static_cast<size_t>(pos - groups[j].inputs.begin())] = {k, op};
    fed->insert(ni);
  }
  return feeds;
}

// For each reduction, the group computed inside its kernel (plan
// reduce_prologue): a group whose one output only that reduction reads, of
// the reduction's input shape, applying no norm itself; a norm that another
// kernel applies (fed) keeps its input.
std::map<size_t, size_t> FormPrologues(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, RedOp>>& reds,
                                       const std::vector<std::map<size_t, NormFeed>>& feeds, const std::set<int>& fed,
                                       std::set<size_t> taken) {
  std::map<size_t, size_t> out;
  for (size_t k = 0; k < reds.size(); ++k) {
    const auto& [ni, op] = reds[k];
    if (fed.count(ni)) continue;
    const Node* x = g.Find(op.input);
    // the reader: the reduction itself, or the max/min it absorbs
    const int reader = op.absorbed.empty() ? ni : g.index.at(op.absorbed.front());
    if (!x || x->users.size() != 1 || x->users[0] != reader) continue;
    for (size_t j = 0; j < groups.size(); ++j) {
      const Group& grp = groups[j];
      if (grp.outputs.size() != 1 || grp.outputs[0] != op.input || grp.shape != op.in_shape) continue;
      if (!feeds[j].empty() || taken.count(j)) continue;
      out[k] = j;
      taken.insert(j);
      break;
    }
  }
  return out;
}

// For each reduction, the group run as its epilogue (plan red_epilogue): a
// sum, mean, max or min (no prologue, not rewritten away) whose value only
// that group reads, the group of the reduction's input shape, applying no
// norm, reading the value broadcast back over exactly the reduced dimensions
// (so the value at a flat index is its row's); and rows that suit it
// (EpilogueFits).

std::map<size_t, RedEpi> FormRedEpilogues(const Graph& g, const std::vector<Group>& groups,
                                          const std::vector<std::pair<int, RedOp>>& reds,
                                          const std::vector<std::map<size_t, NormFeed>>& feeds,
                                          const std::set<size_t>& taken, const std::set<size_t>& skip_reds,
                                          const std::vector<RedSchedule>& want) {
  std::map<size_t, RedEpi> out;
  std::map<int, size_t> group_of;
  for (size_t j = 0; j < groups.size(); ++j) {
    for (int idx : groups[j].nodes) group_of[idx] = j;
  }
  std::set<size_t> used = taken;
  for (size_t k = 0; k < reds.size(); ++k) {
    const auto& [ni, op] = reds[k];
    if (skip_reds.count(k)) continue;
    if (op.kind != "sum" && op.kind != "mean" && op.kind != "amax" && op.kind != "amin") continue;
    if (!EpilogueFits(op, k < want.size() ? want[k] : RedSchedule())) continue;
    const Node& rn = g.nodes[ni];
    // the one group that reads the nodes in `names`, or -1
    auto reader = [&](const std::vector<std::string>& names) -> long {
      long j = -1;
      for (const auto& nm : names) {
        const Node* n = g.Find(nm);
        if (!n || n->users.empty()) return -1;
        for (int u : n->users) {
          auto f = group_of.find(u);
          if (f == group_of.end() || (j >= 0 && static_cast<size_t>(j) != f->second)) return -1;
          j = static_cast<long>(f->second);
        }
      }
      return j;
    };
    long jr = reader({rn.name});
    if (jr < 0) continue;
    RedEpi e;
    if (groups[jr].shape == rn.shape && groups[jr].inputs == std::vector<std::string>{rn.name}) {
      // work on the value alone first (sqrt(mean + eps)), then the main group
      e.pre = static_cast<size_t>(jr);
      jr = reader(groups[jr].outputs);
      if (jr < 0 || static_cast<size_t>(jr) == e.pre || used.count(e.pre) || !feeds[e.pre].empty()) continue;
    }
    const size_t j = static_cast<size_t>(jr);
    e.main = j;
    const Group& grp = groups[j];
    if (used.count(j) || !feeds[j].empty() || grp.shape != op.in_shape) continue;
    // the value, left-padded to the group's rank: 1 over the reduced
    // dimensions, the input's size over the kept ones
    std::vector<int64_t> pad(grp.shape.size() - std::min(grp.shape.size(), rn.shape.size()), 1);
    pad.insert(pad.end(), rn.shape.begin(), rn.shape.end());
    if (pad.size() != grp.shape.size()) continue;
    int64_t kept = 1, reduced = 1;
    bool aligned = true;
    for (size_t d = 0; d < pad.size(); ++d) {
      if (pad[d] == grp.shape[d]) kept *= pad[d];
      else if (pad[d] == 1) reduced *= grp.shape[d];
      else aligned = false;
    }
    if (!aligned || kept != op.geo.rows || reduced != op.geo.R) continue;
    out[k] = e;
    used.insert(j);
    if (e.has_pre()) used.insert(e.pre);
  }
  return out;
}

namespace {

// The affine step y' = f(y, c) of one chain operator on y (the chain value):
// "add", "sub", "rsub" (c - y), "mul" or "div" (y / c); false when f is not one.
bool AffineStep(const EwOp& op, const std::string& y, std::string* kind, EwOperand* c) {
  if (op.operands.size() != 2 || !op.params.empty()) return false;
  const bool first = op.operands[0].node == y, second = op.operands[1].node == y;
  if (first == second) return false;
  *c = op.operands[first ? 1 : 0];
  if (op.fn == "add" || op.fn == "mul") *kind = op.fn;
  else if (op.fn == "sub") *kind = first ? "sub" : "rsub";
  else if (op.fn == "div" && first) *kind = "div";
  else return false;
  return true;
}

}  // namespace

std::vector<LinearReduce> FormLinearReductions(const Graph& g, const std::vector<std::pair<int, RedOp>>& reds) {
  std::vector<LinearReduce> out;
  for (size_t k = 0; k < reds.size(); ++k) {
    const RedOp& op = reds[k].second;
    if ((op.kind != "sum" && op.kind != "mean") || op.geo.IN != 1) continue;
    LinearReduce lr;
    lr.red = k;
    const Node* cur = g.Find(op.input);
    int reader = reds[k].first;
    bool ok = cur != nullptr;
    while (ok) {
      ok = cur->users.size() == 1 && cur->users[0] == reader;
      if (!ok) break;
      GemmOp gop;
      if (ClassifyGemm(g, *cur, &gop) && gop.linear) {
        lr.linear = g.index.at(cur->name);
        lr.gemm = gop;
        break;
      }
      EwOp ew;
      std::string kind;
      EwOperand c;
      ok = ClassifyElementwise(g, *cur, &ew) && ew.operands.size() == 2;
      if (!ok) break;
      // which operand continues the chain: the one that is not a constant, a
      // number or a per-feature tensor (tried in order; a chain has one)
      const Node* next = nullptr;
      for (const auto& o : ew.operands) {
        const Node* n = o.node.empty() ? nullptr : g.Find(o.node);
        if (n && n->is_tensor && n->shape == cur->shape) next = n;
      }
      ok = next && AffineStep(ew, next->name, &kind, &c);
      if (!ok) break;
      if (!c.node.empty()) {
        const Node* cn = g.Find(c.node);
        // c: a number, or a tensor constant along every dimension but the last
        int64_t lead = 1;
        if (cn->is_tensor) {
          for (size_t d = 0; d + 1 < cn->shape.size(); ++d) lead *= cn->shape[d];
        }
        ok = cn->is_number || (cn->is_tensor && cn->dtype == "torch.float32" && lead == 1 &&
                               cn->shape.size() <= cur->shape.size());
        if (ok && (kind == "mul" || kind == "div")) {  // scalings by one value only
          int64_t numel = 1;
          for (int64_t d : cn->shape) numel *= d;
          ok = cn->is_number || numel == 1;
        }
        if (!ok) break;
      }
      const int idx = g.index.at(cur->name);
      lr.chain.insert(lr.chain.begin(), idx);
      lr.steps.insert(lr.steps.begin(), {kind, c});
      reader = idx;
      cur = next;
    }
    if (!ok || lr.linear < 0) continue;
    if (op.geo.R != lr.gemm.N || op.geo.rows != lr.gemm.M) continue;  // over exactly the features
    for (const auto& st : lr.steps) {
      if (!st.c.node.empty() && std::find(lr.operands.begin(), lr.operands.end(), st.c.node) == lr.operands.end()) {
        lr.operands.push_back(st.c.node);
      }
    }
    out.push_back(std::move(lr));
  }
  return out;
}

// For each GEMM, the group it runs as its epilogue: a group of C's shape
// that reads C, holding every reader of C, applying no norm itself.
std::map<size_t, size_t> FormEpilogues(const Graph& g, const std::vector<Group>& groups,
                                       const std::vector<std::pair<int, GemmOp>>& gemms,
                                       const std::vector<std::map<size_t, NormFeed>>& feeds) {
  std::map<size_t, size_t> out;
  std::set<size_t> taken;
  std::map<int, size_t> group_of;
  for (size_t k = 0; k < groups.size(); ++k) {
    for (int idx : groups[k].nodes) group_of[idx] = k;
  }
  for (size_t k = 0; k < gemms.size(); ++k) {
    const Node& n = g.nodes[gemms[k].first];
    if (n.users.empty() || !group_of.count(n.users[0])) continue;
    const size_t j = group_of.at(n.users[0]);
    bool all_in = true;
    for (int u : n.users) all_in = all_in && group_of.count(u) && group_of.at(u) == j;
    const Group& grp = groups[j];
    if (!all_in || taken.count(j) || !feeds[j].empty() || grp.shape != gemms[k].second.out_shape) continue;
    if (std::find(grp.inputs.begin(), grp.inputs.end(), n.name) == grp.inputs.end()) continue;
    out[k] = j;
    taken.insert(j);
  }
  return out;
}


// Sibling reductions (plan siblings): leader -> the later reductions computed
// in its kernel. Members are sums, means, maxima or minima over the same rows
// of one shape (no epilogue, not rewritten away), each read through its
// prologue or directly, sharing a tensor input with an earlier member; a
// later member's inputs are all computed before the leader, whose place in
// the forward the fused launch takes.
std::map<size_t, std::vector<size_t>> FormSiblings(const Graph& g, const std::vector<Group>& groups,
                                                   const std::vector<std::pair<int, RedOp>>& reds,
                                                   const std::map<size_t, size_t>& prologue_of,
                                                   const std::set<size_t>& skip) {
  auto eligible = [&](size_t k) {
    const RedOp& op = reds[k].second;
    return !skip.count(k) && op.absorbed.empty() &&
           (op.kind == "sum" || op.kind == "mean" || op.kind == "amax" || op.kind == "amin");
  };
  auto inputs = [&](size_t k) {
    if (auto p = prologue_of.find(k); p != prologue_of.end()) return groups[p->second].inputs;
    return std::vector<std::string>{reds[k].second.input};
  };
  auto same_rows = [](const RedOp& a, const RedOp& b) {
    const Geometry &x = a.geo, &y = b.geo;
    return a.in_shape == b.in_shape && x.rows == y.rows && x.R == y.R && x.RD == y.RD && x.S1 == y.S1 &&
           x.S2 == y.S2 && x.IN == y.IN && x.S3 == y.S3;
  };
  std::map<size_t, std::vector<size_t>> out;
  std::set<size_t> taken;
  for (size_t k = 0; k < reds.size(); ++k) {
    if (taken.count(k) || !eligible(k)) continue;
    std::set<std::string> tensors;  // the members' tensor inputs so far
    for (const auto& in : inputs(k)) {
      if (!g.Find(in)->is_number) tensors.insert(in);
    }
    for (size_t k2 = k + 1; k2 < reds.size(); ++k2) {
      if (taken.count(k2) || !eligible(k2) || !same_rows(reds[k].second, reds[k2].second)) continue;
      bool shares = false, ready = true;
      for (const auto& in : inputs(k2)) {
        shares = shares || tensors.count(in) > 0;
        ready = ready && g.index.at(in) < reds[k].first;
      }
      if (!shares || !ready) continue;
      for (const auto& in : inputs(k2)) {
        if (!g.Find(in)->is_number) tensors.insert(in);
      }
      out[k].push_back(k2);
      taken.insert(k2);
    }
    if (out.count(k)) taken.insert(k);
  }
  return out;
}

}  // namespace ax::builtin
