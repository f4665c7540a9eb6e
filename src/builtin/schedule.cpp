#include "builtin/schedule.h"

#include <algorithm>

#include "builtin/conv.h"

namespace ax::builtin {

namespace {

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
                                       std::set<size_t> taken = {}) {
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

}  // namespace

std::vector<std::pair<int, RedOp>> FormReductions(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, RedOp>> out;
  if (plan.library_reductions) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    RedOp op;
    if (ClassifyReduction(g, g.nodes[i], &op)) out.push_back({static_cast<int>(i), op});
  }
  // A node another reduction absorbs (the scan inside a reversed scan) is
  // not one of its own.
  std::set<std::string> absorbed;
  for (const auto& [i, op] : out) absorbed.insert(op.absorbed.begin(), op.absorbed.end());
  std::erase_if(out, [&](const auto& r) { return absorbed.count(g.nodes[r.first].name) > 0; });
  return out;
}

std::vector<std::pair<int, RowNormOp>> FormRowNorms(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, RowNormOp>> out;
  if (plan.library_reductions) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    RowNormOp op;
    if (ClassifyRowNorm(g, g.nodes[i], &op)) out.push_back({static_cast<int>(i), op});
  }
  return out;
}

RowNormSchedule RowNormFor(const Plan& plan, size_t k, const RowNormOp& op) {
  if (k < plan.nsched.size()) return plan.nsched[k];
  RowNormSchedule s;
  const auto strategies = RowNormStrategies(op);
  if (!strategies.empty()) DefaultRowNormSchedule(op, strategies.front(), &s);
  return s;
}

std::vector<std::pair<int, GemmOp>> FormGemms(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, GemmOp>> out;
  if (!plan.gemm) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    GemmOp op;
    if (ClassifyGemm(g, g.nodes[i], &op) || (plan.conv && ClassifyConv(g, g.nodes[i], &op))) {
      op.conv_native = op.IsConv() && plan.conv_native;
      out.push_back({static_cast<int>(i), op});
    }
  }
  return out;
}

std::vector<std::pair<int, AttentionOp>> FormAttentions(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, AttentionOp>> out;
  if (!plan.attention) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    AttentionOp op;
    if (ClassifyAttention(g, g.nodes[i], &op)) out.push_back({static_cast<int>(i), op});
  }
  return out;
}

AttentionSchedule AttentionScheduleFor(const Plan& plan, size_t k, const AttentionOp& op) {
  return k < plan.asched.size() ? plan.asched[k] : DefaultAttentionSchedule(op);
}

std::vector<std::pair<int, RnnOp>> FormRnns(const Graph& g, const Plan& plan) {
  std::vector<std::pair<int, RnnOp>> out;
  if (!plan.recurrent) return out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    RnnOp op;
    if (ClassifyRnn(g, g.nodes[i], &op)) out.push_back({static_cast<int>(i), op});
  }
  return out;
}

RnnSchedule RnnScheduleFor(const Plan& plan, size_t k, const RnnOp& op) {
  return k < plan.rsched.size() ? plan.rsched[k] : DefaultRnnSchedule(op);
}

GemmSchedule GemmScheduleFor(const Plan& plan, size_t k, const GemmOp& op) {
  if (k < plan.gsched.size()) return plan.gsched[k];
  return op.IsConv() ? DefaultConvSchedule(op) : GemmSchedule();
}

int CountLinearReductions(const Graph& g) {
  Plan p;
  return static_cast<int>(FormLinearReductions(g, FormReductions(g, p)).size());
}

const char* KernelKindName(KernelKind k) {
  switch (k) {
    case KernelKind::kPointwise: return "pointwise";
    case KernelKind::kRowNorm: return "row norm";
    case KernelKind::kGemm: return "GEMM";
    case KernelKind::kConvolution: return "convolution";
    case KernelKind::kReduction: return "reduction";
    case KernelKind::kSiblings: return "sibling reductions";
    case KernelKind::kLinearReduction: return "linear reduction";
    case KernelKind::kAttention: return "attention";
    case KernelKind::kRecurrent: return "recurrent";
  }
  return "?";
}

int FusedSchedule::TritonKernels() const {
  int n = 0;
  for (const auto& k : kernels) n += k.triton() ? 1 : 0;
  return n;
}

std::vector<size_t> FusedSchedule::LaunchedGroups() const {
  std::vector<size_t> out;
  for (const auto& k : kernels) {
    if (k.kind == KernelKind::kPointwise) out.push_back(k.index);
  }
  return out;
}

FusedSchedule Schedule(const Graph& g, const Plan& plan) {
  FusedSchedule s;
  s.groups = FormGroups(g, plan.Fusion());
  s.reds = FormReductions(g, plan);
  s.gemms = FormGemms(g, plan);
  s.rnorms = FormRowNorms(g, plan);
  s.attns = FormAttentions(g, plan);
  s.rnns = FormRnns(g, plan);
  const auto& groups = s.groups;
  const auto& reds = s.reds;

  // Algebraic rewrites: reductions over a Linear's features computed from
  // the summed weight; the Linear and the chain between are not computed.
  if (plan.algebra) {
    for (auto& lr : FormLinearReductions(g, reds)) {
      std::set<int> chain(lr.chain.begin(), lr.chain.end());
      std::set<size_t> own;
      bool whole = true;  // every group touching the chain is made of chain nodes only
      for (size_t j = 0; j < groups.size(); ++j) {
        int in_chain = 0;
        for (int idx : groups[j].nodes) in_chain += chain.count(idx);
        if (in_chain == 0) continue;
        whole = whole && in_chain == static_cast<int>(groups[j].nodes.size());
        own.insert(j);
      }
      if (!whole) continue;
      s.chain_groups.insert(own.begin(), own.end());
      s.unused.insert(lr.linear);
      s.unused.insert(chain.begin(), chain.end());
      s.linred_of[lr.red] = s.linreds.size();
      s.linreds.push_back(std::move(lr));
    }
    std::erase_if(s.gemms, [&](const auto& ge) { return s.unused.count(ge.first) > 0; });
  }

  // Norms applied inside the one elementwise kernel that reads them.
  s.feeds = plan.norm_epilogue ? FormFeeds(g, groups, reds, &s.fed)
                               : std::vector<std::map<size_t, NormFeed>>(groups.size());

  // Elementwise kernels run as the epilogue of the GEMM they read.
  s.epilogue_of = FormEpilogues(g, groups, s.gemms, s.feeds);
  s.inside = s.chain_groups;
  for (const auto& [k, j] : s.epilogue_of) {
    s.gemm_of_group[j] = k;
    s.inside.insert(j);
  }
  // Reductions over a GEMM's columns computed in its kernel.
  if (plan.gemm_reduce) {
    std::set<size_t> skip;
    for (const auto& [k, i] : s.linred_of) skip.insert(k);
    std::set<size_t> taken = s.inside;  // and groups that apply a norm themselves
    for (size_t j = 0; j < groups.size(); ++j) {
      if (!s.feeds[j].empty()) taken.insert(j);
    }
    s.column_of = FormColumnReductions(g, groups, reds, s.gemms, s.epilogue_of, taken, skip);
    for (const auto& [k, f] : s.column_of) {
      s.gemm_of_column[f.red] = k;
      if (f.has_post()) {
        s.gemm_of_post[f.post] = k;
        s.inside.insert(f.post);
      }
    }
  }
  // Elementwise kernels computed inside the reduction that reads them.
  if (plan.reduce_prologue) {
    s.prologue_of = FormPrologues(g, groups, reds, s.feeds, s.fed, s.inside);
    for (const auto& [k, j] : s.prologue_of) s.inside.insert(j);
  }
  // Elementwise kernels run after the reduction they read, in its kernel.
  if (plan.red_epilogue) {
    std::set<size_t> skip;
    for (const auto& [k, i] : s.linred_of) skip.insert(k);
    for (const auto& [r, k] : s.gemm_of_column) skip.insert(r);
    for (const auto& [k, e] : FormRedEpilogues(g, groups, reds, s.feeds, s.inside, skip, plan.red)) {
      s.epi_of[k] = e;
      s.epi_of_group[e.main] = k;
      s.inside.insert(e.main);
      if (e.has_pre()) s.inside.insert(e.pre);
    }
  }
  // Sibling reductions computed in one kernel, launched at the leader.
  if (plan.siblings) {
    std::set<size_t> skip;
    for (const auto& [k, i] : s.linred_of) skip.insert(k);
    for (const auto& [k, e] : s.epi_of) skip.insert(k);
    for (const auto& [r, k] : s.gemm_of_column) skip.insert(r);
    s.sib_of = FormSiblings(g, groups, reds, s.prologue_of, skip);
    for (const auto& [k, f] : s.sib_of) s.follower.insert(f.begin(), f.end());
  }

  // The resolved plan: every kernel's tile configuration; a kernel that is
  // not launched keeps the default, so that the marker (and so the source)
  // is the same whatever a small step set there.
  Plan& w = s.resolved;
  w = plan;
  w.sched.resize(groups.size());
  for (size_t k = 0; k < groups.size(); ++k) w.sched[k] = s.inside.count(k) ? KernelSchedule() : plan.For(k);
  w.red.resize(reds.size());
  for (size_t k = 0; k < reds.size(); ++k) {
    w.red[k] = s.linred_of.count(k) || s.follower.count(k) || s.gemm_of_column.count(k) ? RedSchedule()
                                                                                           : plan.RedFor(k);
  }
  w.gsched.resize(s.gemms.size());
  for (size_t k = 0; k < s.gemms.size(); ++k) {
    w.gsched[k] = GemmScheduleFor(plan, k, s.gemms[k].second);
    if (s.column_of.count(k)) w.gsched[k] = WithColumnTile(w.gsched[k], s.gemms[k].second);
  }
  w.asched.resize(s.attns.size());
  for (size_t k = 0; k < s.attns.size(); ++k) w.asched[k] = AttentionScheduleFor(plan, k, s.attns[k].second);
  w.rsched.resize(s.rnns.size());
  for (size_t k = 0; k < s.rnns.size(); ++k) w.rsched[k] = RnnScheduleFor(plan, k, s.rnns[k].second);
  w.nsched.resize(s.rnorms.size());
  for (size_t k = 0; k < s.rnorms.size(); ++k) w.nsched[k] = RowNormFor(plan, k, s.rnorms[k].second);

  // The kernel list, in emission order.
  auto kernel = [](KernelKind kind, size_t index, int node) {
    FusedKernel k;
    k.kind = kind;
    k.index = index;
    k.node = node;
    return k;
  };
  for (size_t k = 0; k < groups.size(); ++k) {
    if (s.inside.count(k)) continue;
    FusedKernel fk = kernel(KernelKind::kPointwise, k, groups[k].nodes.back());
    for (const auto& [pos, f] : s.feeds[k]) fk.norm_feeds.push_back(f.k_red);
    s.kernels.push_back(std::move(fk));
  }
  for (size_t k = 0; k < s.rnorms.size(); ++k) {
    s.kernels.push_back(kernel(KernelKind::kRowNorm, k, s.rnorms[k].first));
  }
  for (size_t k = 0; k < s.gemms.size(); ++k) {
    FusedKernel fk = kernel(s.gemms[k].second.IsConv() ? KernelKind::kConvolution : KernelKind::kGemm, k, s.gemms[k].first);
    if (auto e = s.epilogue_of.find(k); e != s.epilogue_of.end()) fk.epilogue.push_back(e->second);
    if (auto c = s.column_of.find(k); c != s.column_of.end()) {
      fk.column = c->second.red;
      if (c->second.has_post()) fk.column_post = c->second.post;
    }
    s.kernels.push_back(std::move(fk));
  }
  for (size_t k = 0; k < s.attns.size(); ++k) {
    s.kernels.push_back(kernel(KernelKind::kAttention, k, s.attns[k].first));
  }
  for (size_t k = 0; k < s.rnns.size(); ++k) {
    s.kernels.push_back(kernel(KernelKind::kRecurrent, k, s.rnns[k].first));
  }
  for (size_t k = 0; k < reds.size(); ++k) {
    if (s.follower.count(k) || s.gemm_of_column.count(k)) continue;
    FusedKernel fk = kernel(KernelKind::kReduction, k, reds[k].first);
    if (s.linred_of.count(k)) fk.kind = KernelKind::kLinearReduction;
    if (auto p = s.prologue_of.find(k); p != s.prologue_of.end()) fk.prologue.push_back(p->second);
    if (auto sb = s.sib_of.find(k); sb != s.sib_of.end()) {
      fk.kind = KernelKind::kSiblings;
      fk.members = sb->second;
      for (size_t m : sb->second) {
        if (auto p = s.prologue_of.find(m); p != s.prologue_of.end()) fk.prologue.push_back(p->second);
      }
    }
    if (auto e = s.epi_of.find(k); e != s.epi_of.end()) {
      if (e->second.has_pre()) fk.epilogue.push_back(e->second.pre);
      fk.epilogue.push_back(e->second.main);
    }
    s.kernels.push_back(std::move(fk));
  }
  return s;
}

namespace {

// The number right after prefix at the start of name (then the end or a
// non-digit), or none.
std::optional<size_t> IndexAfter(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  size_t i = prefix.size(), v = 0;
  const size_t start = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - start < 9) v = v * 10 + (name[i++] - '0');
  if (i == start || (i < name.size() && name[i] >= '0' && name[i] <= '9')) return std::nullopt;
  return v;
}

}  // namespace

std::optional<KernelRef> KernelOfName(const FusedSchedule& s, const std::string& name) {
  auto launched = [&](KernelKind kind, size_t k) -> std::optional<KernelRef> {
    for (const auto& fk : s.kernels) {
      if (fk.kind == kind && fk.index == k) return KernelRef{kind, k};
    }
    return std::nullopt;
  };
  if (auto k = IndexAfter(name, "_ax_kernel")) return launched(KernelKind::kPointwise, *k);
  if (auto k = IndexAfter(name, "_ax_gemm_kernel"); k && *k < s.gemms.size()) {
    return launched(s.gemms[*k].second.IsConv() ? KernelKind::kConvolution : KernelKind::kGemm, *k);
  }
  if (auto k = IndexAfter(name, "_ax_rnorm")) return launched(KernelKind::kRowNorm, *k);
  if (auto k = IndexAfter(name, "_ax_attn_kernel")) return launched(KernelKind::kAttention, *k);
  if (auto k = IndexAfter(name, "_ax_rnn_kernel")) return launched(KernelKind::kRecurrent, *k);
  if (auto k = IndexAfter(name, "_ax_rnn_proj")) return launched(KernelKind::kRecurrent, *k);
  if (auto k = IndexAfter(name, "_ax_red")) {
    if (auto r = launched(KernelKind::kReduction, *k)) return r;
    return launched(KernelKind::kSiblings, *k);
  }
  return std::nullopt;
}

std::optional<KernelRef> SlowestKernel(const FusedSchedule& s,
                                       const std::vector<std::pair<std::string, double>>& times) {
  std::vector<std::pair<KernelRef, double>> sums;
  for (const auto& [name, ms] : times) {
    const auto ref = KernelOfName(s, name);
    if (!ref) continue;
    auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& e) { return e.first == *ref; });
    if (it == sums.end()) sums.push_back({*ref, ms});
    else it->second += ms;
  }
  if (sums.empty()) return std::nullopt;
  return std::max_element(sums.begin(), sums.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

int CountNormEpilogues(const Graph& g, const Plan& plan) {
  Plan p = plan;
  p.norm_epilogue = true;
  return static_cast<int>(Schedule(g, p).fed.size());
}

int CountRedEpilogues(const Graph& g, const Plan& plan) {
  Plan p = plan;
  p.red_epilogue = true;
  return static_cast<int>(Schedule(g, p).epi_of.size());
}

int CountReducePrologues(const Graph& g, const Plan& plan) {
  Plan p = plan;
  p.reduce_prologue = true;
  return static_cast<int>(Schedule(g, p).prologue_of.size());
}

int CountColumnReductions(const Graph& g, const Plan& plan) {
  Plan p = plan;
  p.gemm_reduce = true;
  return static_cast<int>(Schedule(g, p).column_of.size());
}

int CountSiblingReductions(const Graph& g, const Plan& plan) {
  Plan p = plan;
  p.siblings = true;
  int n = 0;
  for (const auto& [k, f] : Schedule(g, p).sib_of) n += static_cast<int>(f.size());
  return n;
}

}  // namespace ax::builtin
