// BuiltinProposer: candidate kernels without an LLM, from the task's traced
// graph (src/builtin/{graph,fuse,codegen}).
//
// A large step proposes the next structurally different plan: all fusible
// operators fused maximally, then each fusion boundary inside a kernel, then
// one kernel per operator. A small step takes the parent's plan as the search
// kept it with the parent's node (Proposal::plan) and changes one schedule
// knob of one kernel (BLOCK, warps); a failed parent gets a large step.
// The same source is never proposed twice. A task that cannot be traced is
// declined: the first proposal says why and stops the run.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "builtin/codegen.h"
#include "builtin/graph.h"
#include "judge/judge.h"
#include "search/proposer.h"

namespace ax::builtin {

class BuiltinProposer : public ax::search::Proposer {
 public:
  // A traced graph and the task's source.
  BuiltinProposer(Graph graph, std::string task_source);
  // A task that could not be traced: every proposal declines with `why`.
  static std::unique_ptr<BuiltinProposer> Declining(std::string why);

  ax::search::Proposal Propose(const ax::search::StepContext& ctx) override;
  const char* Origin() const override { return "builtin"; }

  // The large-step plans in the order they are proposed (for tests and reports).
  std::vector<Plan> LargePlans() const;
  // The graph a plan is generated from: under plan.algebra, the one with the
  // reductions over size-1 dimensions rewritten (SimplifyTrivialReductions)
  // and chains of scalar arithmetic folded (FoldScalarChains); under
  // plan.attention, with written-out attention as one node
  // (LowerExplicitAttention).
  const Graph& GraphFor(const Plan& plan) const;
  // The kernel launches one call of plan's forward makes (graph_capture.h).
  int Launches(const Plan& plan) const;
  // plan's source, generated from GraphFor(plan), with *resolved the plan as
  // its marker records it (every schedule filled in). Unlike a proposal it
  // may repeat a source; for `adaexplore compile` and tests.
  Status Render(const Plan& plan, std::string* source, Plan* resolved, int* kernels = nullptr) const;
  // Why every proposal declines (empty: the task traced).
  const std::string& DeclineReason() const { return decline_; }

 private:
  BuiltinProposer() = default;
  ax::search::Proposal Large(const std::string& why);
  // A small step from parent: its forward replayed from a CUDA graph where
  // its profile (times) shows the GPU idle between launches for more than
  // 1 - kGraphBusyShare of its measured runtime_ms (the first such parent
  // of the task only); else one knob of one kernel, tried first on the
  // kernel that took the most of its GPU time.
  ax::search::Proposal Small(const Plan& parent, const std::vector<ax::search::Outcome::KernelMs>& times,
                             double runtime_ms);

  // The steps of kernel `only` (none: of every kernel, in a fixed order) of
  // parent, scheduled as sched; true with *p filled when one is new.
  bool SmallSteps(const Plan& parent, const FusedSchedule& sched, const std::optional<KernelRef>& only,
                  ax::search::Proposal* p);
  // Generates plan; true (and fills p) when it is new.
  bool TryPlan(const Plan& plan, ax::search::Proposal* p, std::string* error);

  Graph graph_;
  Graph simple_;    // graph_ with its trivial reductions rewritten and scalar chains folded
  Graph attn_graph_, attn_simple_;  // graph_ and simple_ with written-out attention lowered
  int explicit_attention_ = 0;      // how many written-out attentions graph_ has
  int trivial_ = 0;  // how many reductions
  int folded_ = 0;   // how many scalar operators folded away
  std::string task_source_;
  std::string decline_;               // non-empty: cannot trace
  std::set<std::string> seen_;        // hashes of sources already proposed
  size_t next_large_ = 0;
  bool graph_step_taken_ = false;     // a small step has proposed a graphed forward
  int groups_ = 0;                    // kernels under the maximal plan
};

// A plan in words ("maximal fusion, convolutions as Triton implicit GEMMs ...").
std::string DescribePlan(const Plan& p);

// Traces task on the judge and builds a proposer for it; a task that cannot
// be traced gives a declining proposer (not an error). Errors are the judge's
// own (the worker could not start, the task does not load).
Status MakeBuiltinProposer(Judge* judge, const TaskRef& task, const JudgeOptions& opts,
                           std::unique_ptr<ax::search::Proposer>* out);
// The same, typed: a task that cannot be traced gives a proposer whose
// DeclineReason() says why.
Status MakeBuiltinCompiler(Judge* judge, const TaskRef& task, const JudgeOptions& opts,
                           std::unique_ptr<BuiltinProposer>* out);

}  // namespace ax::builtin
