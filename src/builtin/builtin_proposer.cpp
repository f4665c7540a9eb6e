#include "builtin/builtin_proposer.h"

#include "common/util.h"

namespace ax::builtin {

using ax::search::Proposal;
using ax::search::StepContext;

namespace {

const int kBlocks[] = {128, 256, 512, 1024, 2048, 4096, 8192};
const int kWarps[] = {1, 2, 4, 8, 16};

std::string Describe(const Plan& p) {
  std::string s = p.singleton ? "one kernel per operator" : "maximal fusion";
  if (!p.cuts.empty()) {
    s += ", split after";
    for (const auto& c : p.cuts) s += " " + c;
  }
  return s;
}

}  // namespace

BuiltinProposer::BuiltinProposer(Graph graph, std::string task_source)
    : graph_(std::move(graph)), task_source_(std::move(task_source)) {
  groups_ = static_cast<int>(FormGroups(graph_, FusionOptions()).size());
}

std::unique_ptr<BuiltinProposer> BuiltinProposer::Declining(std::string why) {
  std::unique_ptr<BuiltinProposer> p(new BuiltinProposer());
  p->decline_ = why.empty() ? "cannot trace: unknown reason" : std::move(why);
  return p;
}

std::vector<Plan> BuiltinProposer::LargePlans() const {
  std::vector<Plan> plans;
  plans.push_back(Plan());
  for (const auto& grp : FormGroups(graph_, FusionOptions())) {
    for (size_t j = 0; j + 1 < grp.nodes.size(); ++j) {
      Plan p;
      p.cuts = {graph_.nodes[grp.nodes[j]].name};
      plans.push_back(p);
    }
  }
  Plan single;
  single.singleton = true;
  plans.push_back(single);
  // Larger blocks for the maximal plan: a different work split per program.
  for (int b : {4096, 256}) {
    Plan p;
    for (int k = 0; k < groups_; ++k) p.sched.push_back({b, b >= 4096 ? 8 : 2});
    plans.push_back(p);
  }
  return plans;
}

bool BuiltinProposer::TryPlan(const Plan& plan, Proposal* p, std::string* error) {
  std::string src;
  Status s = Generate(graph_, task_source_, plan, &src);
  if (!s.ok()) {
    *error = s.message();
    return false;
  }
  std::string h = Sha256Hex(src);
  if (seen_.count(h)) return false;
  seen_.insert(h);
  p->source = std::move(src);
  return true;
}

Proposal BuiltinProposer::Large(const std::string& why) {
  Proposal p;
  std::vector<Plan> plans = LargePlans();
  std::string error;
  while (next_large_ < plans.size()) {
    const Plan& plan = plans[next_large_++];
    if (TryPlan(plan, &p, &error)) {
      p.note = "builtin: " + why + "plan " + Describe(plan);
      return p;
    }
  }
  p.note = error.empty() ? "builtin: every plan has been proposed" : "builtin: " + error;
  return p;
}

Proposal BuiltinProposer::Small(const Plan& parent, const std::string& parent_verdict) {
  Proposal p;
  std::string error;
  int n = std::max(1, static_cast<int>(FormGroups(graph_, parent.Fusion()).size()));
  // Neighbours first (one knob, one step), kernel by kernel; then further values.
  for (int dist = 1; dist <= 6; ++dist) {
    for (int k = 0; k < n; ++k) {
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
          return p;
        }
      }
    }
  }
  return Large("every schedule of the parent's plan was tried; ");
}

Proposal BuiltinProposer::Propose(const StepContext& ctx) {
  if (!decline_.empty()) {
    Proposal p;
    p.note = decline_;
    p.stop_run = true;
    return p;
  }
  if (ctx.large) return Large("");
  Plan parent;
  Status s = ParsePlanMarker(ctx.prompt.parent.source, &parent);
  if (!s.ok()) return Large("the parent has no plan (" + s.message() + "); ");
  const std::string& v = ctx.prompt.parent.verdict;
  if (!v.empty() && v.rfind("correct", 0) != 0) return Large("the parent failed; ");
  return Small(parent, v);
}

Status MakeBuiltinProposer(Judge* judge, const TaskRef& task, const JudgeOptions& opts,
                           std::unique_ptr<ax::search::Proposer>* out) {
  nlohmann::json j;
  Status s = judge->Trace(task, opts, &j);
  if (!s.ok()) {
    if (s.message().rfind("cannot trace", 0) == 0) {
      *out = BuiltinProposer::Declining(s.message());
      return Status::Ok();
    }
    return s;
  }
  Graph g;
  s = ParseGraph(j, &g);
  if (!s.ok()) {
    *out = BuiltinProposer::Declining("cannot trace: " + s.message());
    return Status::Ok();
  }
  *out = std::make_unique<BuiltinProposer>(std::move(g), task.source);
  return Status::Ok();
}

}  // namespace ax::builtin
