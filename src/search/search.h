// TaskSearch: the search for the fastest correct kernel of one task within a
// budget: MCTS (the AdaExplore tree search), iterative refinement (one chain
// of small steps) or best-of-N (independent large steps), all over the same
// tree, proposer, judge and run store, so methods compare side by side.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <optional>
#include <string>
#include <vector>

#include "judge/judge.h"
#include "search/proposer.h"
#include "search/run_store.h"
#include "search/tree.h"

namespace ax::search {

struct SearchConfig {
  std::string method = "mcts";  // mcts | ir | bon
  int steps = 20;
  SearchParams params;
  unsigned long long seed = 0;
  std::string backend = "triton";
  std::string hardware = "an NVIDIA GPU";
  std::vector<std::string> rules;   // skill-memory rules for the prompts, best first
  int retime_top = 3;               // candidates re-timed at the end
  double max_wall_s = 0;            // 0: no limit
  // Steps of the warm-start proposer (TaskSearch::SetWarmStart) before the
  // first step of the main one; counted against `steps` (clamped to it).
  int warm_start_steps = 0;
};

struct TaskResult {
  std::string task;
  std::string status;        // "found", "none", "stopped: ..."
  int steps_done = 0;
  int best_node = -1;
  Verdict best;              // the re-timed verdict of the winner
  int llm_calls = 0, llm_replayed = 0, judged = 0, judge_reused = 0;
  bool first_correct = false;  // the main proposer's first proposal was correct (pass@1)
  double wall_s = 0;
  int warm_start_steps = 0;    // steps the warm-start proposer took (nodes it added)
  // Where the winner came from: "builtin" (a warm-start node) or the main
  // proposer's Origin(); "" without a winner. refines: the winner is a chain
  // of the main proposer's small steps on a warm-start kernel.
  std::string best_origin;
  bool best_refines_warm_start = false;
  // Not ok when the search stopped early; its code says why (a stop of the
  // proposer, see Proposal::stop, or of the budget check). The message is
  // what `status` shows after "stopped: ".
  Status stop;
  // Candidates of the final re-timing that did not come back correct, each
  // {"node": id, "reason": one line}; a timeout, a judge error or a failure
  // of the trusted reference is retried once.
  nlohmann::json retime_failures = nlohmann::json::array();
  nlohmann::json ToJson() const;
  // The result a finished task stored (ToJson): false when j is not one, or
  // the task did not finish (stopped, or a summary without its verdict).
  static bool FromStored(const nlohmann::json& j, TaskResult* out);
};

// One event per step (and per failed re-timing), for the live display: the
// line to show, and the figures a progress bar needs.
struct Progress {
  std::string task;
  std::string line;
  int step = 0;   // the step just done (1-based); 0 for an event that is not a step
  int steps = 0;  // the task's step budget
  std::optional<double> best_speedup;  // the best correct candidate's, so far
};
using ProgressFn = std::function<void(const Progress& p)>;

class TaskSearch {
 public:
  TaskSearch(TaskRef task, Judge* judge, JudgeOptions judge_options, Proposer* proposer, RunStore* store,
             SearchConfig cfg, ProgressFn progress, std::function<Status()> budget_check);
  // Runs to the budget; writes best.py into out_dir when a correct kernel
  // was found. A non-ok status means the run could not go on (store, judge).
  Status Run(const std::string& out_dir, TaskResult* result);
  const Tree& tree() const { return tree_; }
  // Rules for each prompt, asked afresh every step (a memory that learns
  // during the run); when unset, cfg.rules.
  void SetRulesProvider(std::function<std::vector<std::string>()> f) { rules_provider_ = std::move(f); }
  // A second proposer that takes the first cfg.warm_start_steps steps: large
  // steps from the root, whose nodes are marked warm_start. Its first
  // proposal stopping the run (a task it declines) spends no step; nor does
  // an empty proposal (it has nothing new): the rest of the budget then goes
  // to the main proposer. Not owned; nullptr: no warm start.
  void SetWarmStart(Proposer* warm) { warm_ = warm; }
  // Called after each judged candidate (not duplicates or empty proposals,
  // nor the warm-start proposer's candidates).
  void SetOnJudged(std::function<void(const std::string& source, const Outcome& o)> f) { on_judged_ = std::move(f); }

 private:
  int SelectNode(bool* large);
  Outcome Judge1(const std::string& source, Verdict* verdict, Status* fatal);
  StepContext Context(int node, bool large);
  ShownKernel Show(int node) const;
  std::optional<double> BestSpeedup() const;  // the tree's best correct candidate's
  void SetOrigin(TaskResult* result) const;    // best_origin, best_refines_warm_start

  TaskRef task_;
  Judge* judge_;
  JudgeOptions jopts_;
  Proposer* proposer_;
  Proposer* warm_ = nullptr;
  RunStore* store_;
  SearchConfig cfg_;
  ProgressFn progress_;
  std::function<Status()> budget_check_;
  std::function<std::vector<std::string>()> rules_provider_;
  std::function<void(const std::string&, const Outcome&)> on_judged_;
  Tree tree_;
  std::mt19937_64 rng_;
  int root_ = 0;
  int ir_tip_ = 0;
  int judged_ = 0, reused_ = 0;
};

// One line saying how a verdict went, as prompts and the display show it.
std::string VerdictLine(const Outcome& o);
Outcome OutcomeOf(const Verdict& v);

}  // namespace ax::search
