// BuiltinProposer's small steps: one schedule knob of one kernel of the
// parent's plan (row norms, GEMMs and convolutions, attention, recurrent
// modules, reductions, then elementwise kernels), nearest values first.
#include "builtin/builtin_proposer.h"

#include "builtin/conv.h"

namespace ax::builtin {

using ax::search::Proposal;

namespace {

const int kBlocks[] = {128, 256, 512, 1024, 2048, 4096, 8192};
const int kWarps[] = {1, 2, 4, 8, 16};

}  // namespace

bool BuiltinProposer::SmallSteps(const Plan& parent, const FusedSchedule& sched, const std::optional<KernelRef>& only,
                                 Proposal* out) {
  Proposal& p = *out;
  std::string error;
  // With `only`, the steps of that kernel alone.
  auto wants = [&](std::initializer_list<KernelKind> kinds, size_t k) {
    if (!only) return true;
    if (only->index != k) return false;
    for (KernelKind kind : kinds) {
      if (kind == only->kind) return true;
    }
    return false;
  };
  const Graph& graph = GraphFor(parent);  // the parent's plan reads its knobs off this graph
  // Row norms: one knob of one norm's schedule (its strategy stays).
  const auto rnorms = FormRowNorms(graph, parent);
  for (size_t k = 0; k < rnorms.size(); ++k) {
    if (!wants({KernelKind::kRowNorm}, k)) continue;
    const RowNormSchedule cur = RowNormFor(parent, k, rnorms[k].second);
    for (const RowNormSchedule& c : RowNormNeighbours(rnorms[k].second, cur)) {
      Plan q = parent;
      q.nsched.resize(rnorms.size());
      for (size_t j = 0; j < rnorms.size(); ++j) q.nsched[j] = RowNormFor(parent, j, rnorms[j].second);
      q.nsched[k] = c;
      if (TryPlan(q, &p, &error)) {
        p.note = "builtin: row norm " + std::to_string(k) + ": " + cur.Describe() + " -> " + c.Describe();
        return true;
      }
    }
  }
  // GEMMs first (they dominate where they exist): one knob of one GEMM.
  std::vector<std::pair<int, GemmOp>> gemms = FormGemms(graph, parent);
  for (int dist = 1; dist <= 2; ++dist) {
    for (size_t k = 0; k < gemms.size(); ++k) {
      if (!wants({KernelKind::kGemm, KernelKind::kConvolution}, k)) continue;
      const GemmSchedule cur = GemmScheduleFor(parent, k, gemms[k].second);
      std::vector<std::pair<std::string, GemmSchedule>> cands;
      const int f = 1 << dist;
      auto add = [&](const char* knob, int GemmSchedule::*field, int down, int up) {
        for (int v : {down, up}) {
          GemmSchedule c = cur;
          c.*field = v;
          cands.push_back({knob, c});
        }
      };
      add("stages", &GemmSchedule::stages, cur.stages - dist, cur.stages + dist);
      add("BK", &GemmSchedule::bk, cur.bk / f, cur.bk * f);
      add("BN", &GemmSchedule::bn, cur.bn / f, cur.bn * f);
      add("BM", &GemmSchedule::bm, cur.bm / f, cur.bm * f);
      add("warps", &GemmSchedule::warps, cur.warps / f, cur.warps * f);
      add("GROUP_M", &GemmSchedule::group_m, std::max(1, cur.group_m / f), cur.group_m * f);
      for (const auto& [knob, c] : cands) {
        const GemmOp& op = gemms[k].second;
        if (!(op.IsConv() ? ConvScheduleValid(op, c) : c.ValidForDot()) || c.warps < 4) continue;
        // a direct convolution has neither a K tile nor pipelined operands
        if (op.IsConv() && ConvDirect(op) && (c.bk != cur.bk || c.stages != cur.stages || c.group_m != cur.group_m)) {
          continue;
        }
        Plan q = parent;
        q.gsched.resize(gemms.size());
        for (size_t j = 0; j < gemms.size(); ++j) q.gsched[j] = GemmScheduleFor(parent, j, gemms[j].second);
        q.gsched[k] = c;
        if (TryPlan(q, &p, &error)) {
          p.note = std::string("builtin: ") + (gemms[k].second.IsConv() ? "convolution " : "GEMM ") +
                   std::to_string(k) + " " + knob + " changed (BM " + std::to_string(c.bm) +
                   ", BN " + std::to_string(c.bn) + ", BK " + std::to_string(c.bk) + ", warps " +
                   std::to_string(c.warps) + ", stages " + std::to_string(c.stages) + ", GROUP_M " +
                   std::to_string(c.group_m) + ")";
          return true;
        }
      }
    }
  }
  // Recurrent modules: BJ, warps, BK or BB of one module's kernel doubled or
  // halved, or its stages one more or less.
  const auto rnns = FormRnns(graph, parent);
  for (size_t k = 0; k < rnns.size(); ++k) {
    if (!wants({KernelKind::kRecurrent}, k)) continue;
    const RnnSchedule cur = RnnScheduleFor(parent, k, rnns[k].second);
    std::vector<std::pair<std::string, RnnSchedule>> cands;
    if (!rnns[k].second.Wavefront()) {  // the input projections before the steps, or inside them
      RnnSchedule c = cur;
      c.pre = 1 - cur.pre;
      cands.push_back({"precomputed input projections", c});
    }
    for (auto [knob, field] : {std::pair{"BJ", &RnnSchedule::bj}, std::pair{"warps", &RnnSchedule::warps},
                               std::pair{"BK", &RnnSchedule::bk}, std::pair{"BB", &RnnSchedule::bb}}) {
      for (int f : {2, -2}) {
        RnnSchedule c = cur;
        c.*field = f > 0 ? cur.*field * f : cur.*field / -f;
        cands.push_back({knob, c});
      }
    }
    for (int d : {1, -1}) {
      RnnSchedule c = cur;
      c.stages += d;
      cands.push_back({"stages", c});
    }
    for (const auto& [knob, c] : cands) {
      if (!c.Valid()) continue;
      Plan q = parent;
      q.rsched.resize(rnns.size());
      for (size_t j = 0; j < rnns.size(); ++j) q.rsched[j] = RnnScheduleFor(parent, j, rnns[j].second);
      q.rsched[k] = c;
      if (TryPlan(q, &p, &error)) {
        p.note = "builtin: recurrent module " + std::to_string(k) + " " + knob + " changed (BJ " + std::to_string(c.bj) +
                 ", BK " + std::to_string(c.bk) + ", BB " + std::to_string(c.bb) + ", warps " +
                 std::to_string(c.warps) + ", stages " + std::to_string(c.stages) + ", input projections " +
                 (c.pre ? "precomputed" : "per step") + ")";
        return true;
      }
    }
  }
  // Attention: BM, BN, warps or stages of one attention kernel, doubled or halved.
  const auto attns = FormAttentions(graph, parent);
  for (size_t k = 0; k < attns.size(); ++k) {
    if (!wants({KernelKind::kAttention}, k)) continue;
    const AttentionSchedule cur = AttentionScheduleFor(parent, k, attns[k].second);
    std::vector<std::pair<std::string, AttentionSchedule>> cands;
    for (auto [knob, field] : {std::pair{"BM", &AttentionSchedule::bm}, std::pair{"BN", &AttentionSchedule::bn},
                               std::pair{"warps", &AttentionSchedule::warps}}) {
      for (int f : {2, -2}) {
        AttentionSchedule c = cur;
        c.*field = f > 0 ? cur.*field * f : cur.*field / -f;
        cands.push_back({knob, c});
      }
    }
    for (int d : {1, -1}) {
      AttentionSchedule c = cur;
      c.stages += d;
      cands.push_back({"stages", c});
    }
    for (const auto& [knob, c] : cands) {
      if (!c.Valid()) continue;
      Plan q = parent;
      q.asched.resize(attns.size());
      for (size_t j = 0; j < attns.size(); ++j) q.asched[j] = AttentionScheduleFor(parent, j, attns[j].second);
      q.asched[k] = c;
      if (TryPlan(q, &p, &error)) {
        p.note = "builtin: attention " + std::to_string(k) + " " + knob + " changed (BM " + std::to_string(c.bm) +
                 ", BN " + std::to_string(c.bn) + ", warps " + std::to_string(c.warps) + ", stages " +
                 std::to_string(c.stages) + ")";
        return true;
      }
    }
  }
  // Elementwise kernels launched on their own (a group inside another
  // kernel has no tile configuration of its own).
  const int n = static_cast<int>(sched.groups.size());
  // Neighbours first (one knob, one step), kernel by kernel; then further values.
  for (int dist = 1; dist <= 6; ++dist) {
    for (size_t launched : sched.LaunchedGroups()) {
      if (!wants({KernelKind::kPointwise}, launched)) continue;
      const int k = static_cast<int>(launched);
      KernelSchedule cur = parent.For(k);
      int bi = 0, wi = 0;
      for (int i = 0; i < 7; ++i) if (kBlocks[i] == cur.block) bi = i;
      for (int i = 0; i < 5; ++i) if (kWarps[i] == cur.warps) wi = i;
      std::vector<KernelSchedule> cands;
      for (int sgn : {+1, -1}) {
        int b = bi + sgn * dist, w = wi + sgn * dist;
        if (b >= 0 && b < 7) cands.push_back({kBlocks[b], cur.warps});
        if (w >= 0 && w < 5) cands.push_back({cur.block, kWarps[w]});
      }
      for (const auto& c : cands) {
        Plan q = parent;
        q.sched.resize(std::max<size_t>(q.sched.size(), n));
        for (int j = 0; j < n; ++j) q.sched[j] = parent.For(j);
        q.sched[k] = c;
        if (TryPlan(q, &p, &error)) {
          p.note = "builtin: kernel " + std::to_string(k) + " BLOCK " + std::to_string(cur.block) + "->" +
                   std::to_string(c.block) + ", warps " + std::to_string(cur.warps) + "->" + std::to_string(c.warps);
          return true;
        }
      }
    }
  }
  // Reductions: BLOCK_R, BLOCK_M, warps, split, each doubled or halved.
  std::vector<std::pair<int, RedOp>> reds = FormReductions(graph, parent);
  // Whether reduction j's epilogue runs in the split-row kernel (it fits only
  // so); its requested schedule is then kept as it is.
  auto split_epilogue = [&](size_t j) {
    RedSchedule off = parent.RedFor(j);
    off.coop = -1;
    return parent.red_epilogue && EpilogueFits(reds[j].second, parent.RedFor(j)) && !EpilogueFits(reds[j].second, off);
  };
  for (int dist = 1; dist <= 3; ++dist) {
    for (size_t k = 0; k < reds.size(); ++k) {
      if (!wants({KernelKind::kReduction, KernelKind::kSiblings}, k)) continue;
      RedSchedule cur = ResolveSchedule(reds[k].second, parent.RedFor(k));
      const int f = 1 << dist;
      std::vector<std::pair<std::string, RedSchedule>> cands;
      for (int up : {1, 0}) {
        RedSchedule c = cur;
        c.block_r = up ? cur.block_r * f : std::max(16, cur.block_r / f);
        cands.push_back({"BLOCK_R", c});
        c = cur;
        c.block_m = up ? std::min(256, cur.block_m * f) : std::max(1, cur.block_m / f);
        cands.push_back({"BLOCK_M", c});
        c = cur;
        c.warps = up ? std::min(16, cur.warps * f) : std::max(1, cur.warps / f);
        cands.push_back({"warps", c});
        static const std::set<std::string> kWholeRow = {"softmax", "log_softmax", "logsumexp", "cumsum", "cumprod", "xent"};
        if (!kWholeRow.count(reds[k].second.kind)) {
          c = cur;
          c.split = up ? std::min(1024, cur.split * f) : std::max(1, cur.split / f);
          cands.push_back({"split", c});
        }
      }
      if (CoopFits(reds[k].second)) {
        // The split-row kernel: on or off (the other knobs back to their
        // defaults), and its programs per SM doubled or halved.
        RedSchedule c;
        c.coop = cur.coop > 0 ? -1 : (reds[k].second.kind == "norm" ? 4 : 8);
        if (dist == 1) cands.insert(cands.begin(), {"split-row kernel", c});
        if (cur.coop > 0) {
          for (int up : {1, 0}) {
            c = cur;
            c.coop = up ? std::min(32, cur.coop * f) : std::max(1, cur.coop / f);
            cands.push_back({"programs per SM", c});
          }
          if (reds[k].second.kind == "norm" && dist == 1) {
            // the chunks held until the row is complete, re-read from L2, or
            // held a round while the next chunk is read
            c = cur;
            c.lag = cur.lag == 1 ? -1 : 1;
            cands.push_back({"chunk re-read", c});
            c = cur;
            c.lag = cur.lag == 2 ? -1 : 2;
            cands.push_back({"chunk held a round", c});
          }
        }
      }
      // A split-row reduction epilogue (a sum, mean, max or min whose epilogue
      // fits only so): off, the epilogue then a kernel of its own, and its
      // programs per SM doubled or halved. Its chunk and warps are the
      // requested schedule's, which the resolved one does not show.
      if (split_epilogue(k)) {
        RedSchedule off = parent.RedFor(k);
        off.coop = -1;
        if (dist == 1) cands.push_back({"split-row epilogue off", off});
        const int per_sm = parent.RedFor(k).coop > 0 ? parent.RedFor(k).coop : kCoopEpiloguePerSm;
        for (int up : {1, 0}) {
          RedSchedule c = parent.RedFor(k);
          c.coop = up ? std::min(32, per_sm * f) : std::max(1, per_sm / f);
          if (c.coop != per_sm) cands.push_back({"split-row epilogue programs per SM", c});
        }
      }
      for (const auto& [knob, c] : cands) {
        if (static_cast<int64_t>(c.block_m) * c.block_r > 16384) continue;
        // a change the schedule resolves away would only repeat the parent
        // (the split-row epilogue's knobs are not in the resolved schedule)
        const bool epi_knob = knob.rfind("split-row epilogue", 0) == 0;
        if (!epi_knob && ResolveSchedule(reds[k].second, c) == cur) continue;
        Plan q = parent;
        q.red.resize(std::max(q.red.size(), reds.size()));
        for (size_t j = 0; j < reds.size(); ++j) {
          q.red[j] = split_epilogue(j) ? parent.RedFor(j) : ResolveSchedule(reds[j].second, parent.RedFor(j));
        }
        q.red[k] = c;
        if (TryPlan(q, &p, &error)) {
          p.note = "builtin: reduction " + std::to_string(k) + " (" + reds[k].second.kind + ") " + knob + " changed";
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace ax::builtin
