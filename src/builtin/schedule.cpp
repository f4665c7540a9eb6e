#include "builtin/schedule.h"

#include <algorithm>

#include "builtin/conv.h"
#include "builtin/schedule_fusion.h"

namespace ax::builtin {

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
  return op.IsConv() ? DefaultConvSchedule(op) : op.Batched() ? DefaultBatchedSchedule(op) : GemmSchedule();
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
  // Norm statistics computed in the kernel of the convolution they read.
  if (plan.conv_stats) {
    std::set<size_t> skip;
    for (const auto& [k, i] : s.linred_of) skip.insert(k);
    for (const auto& [r, k] : s.gemm_of_column) skip.insert(r);
    s.stats_of = FormConvStats(g, groups, reds, s.gemms, s.epilogue_of, skip);
    for (const auto& [k, r] : s.stats_of) s.conv_of_stats[r] = k;
    for (auto& fm : s.feeds) {
      for (auto& [pos, f] : fm) f.stats_in = s.conv_of_stats.count(f.k_red) > 0;
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
    w.red[k] = s.linred_of.count(k) || s.follower.count(k) || s.gemm_of_column.count(k) || s.conv_of_stats.count(k)
                   ? RedSchedule()
                   : plan.RedFor(k);
  }
  w.gsched.resize(s.gemms.size());
  for (size_t k = 0; k < s.gemms.size(); ++k) {
    w.gsched[k] = GemmScheduleFor(plan, k, s.gemms[k].second);
    if (auto c = s.column_of.find(k); c != s.column_of.end()) {
      w.gsched[k] = WithColumnTile(w.gsched[k], s.gemms[k].second, reds[c->second.red].second);
    }
    if (s.stats_of.count(k)) w.gsched[k] = WithStatsTile(w.gsched[k], s.gemms[k].second);
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
    if (auto st = s.stats_of.find(k); st != s.stats_of.end()) fk.stats = st->second;
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

  // Concatenations whose pieces these kernels store in place.
  bool device_input = false;
  for (const Node& n : g.nodes) device_input = device_input || (n.op == "placeholder" && n.is_tensor);
  s.cats = FormCatSlots(g, FlatStores(g, s), device_input);
  return s;
}

std::vector<std::string> FlatOutputs(const Graph& g, const FusedSchedule& s, const FusedKernel& k) {
  if (k.kind == KernelKind::kPointwise) return s.groups[k.index].outputs;
  if ((k.kind != KernelKind::kGemm && k.kind != KernelKind::kConvolution) || k.column || k.stats) return {};
  if (!k.epilogue.empty()) return s.groups[k.epilogue.front()].outputs;
  return {g.nodes[s.gemms[k.index].first].name};
}

std::set<std::string> FlatStores(const Graph& g, const FusedSchedule& s) {
  std::set<std::string> out;
  for (const FusedKernel& k : s.kernels) {
    for (auto& o : FlatOutputs(g, s, k)) out.insert(std::move(o));
  }
  return out;
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

int CountConvStats(const Graph& g, const Plan& plan) {
  Plan p = plan;
  p.conv_stats = true;
  return static_cast<int>(Schedule(g, p).stats_of.size());
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
