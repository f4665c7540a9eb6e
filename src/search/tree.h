// Tree: the search tree of the AdaExplore Monte Carlo tree search, as pure
// data and decisions. It knows nothing of LLMs, judges or files: callers add
// nodes, report verdicts and rewards, and ask which node to expand next, which
// kind of step to take there, and which kernels to show the proposer.
//
// The root holds the task's PyTorch reference. It is not a candidate: it has
// no verdict and no reward of its own, is never found by hash, never enters a
// pool or the best list, and always takes a large step (writing a kernel from
// scratch). Its visits and rewards are the sums over all judged candidates.
//
// Reward, Q and selection follow the paper and its public reference:
//   reward   0 (did not compile, or nothing new), a small constant
//            (compiled but wrong), or a value growing with speedup (correct);
//   Q(n)   = alpha * max reward + (1 - alpha) * mean reward   (0 if unvisited);
//   UCT(ch)= Q(ch) + c * sqrt(ln(N(n) + 1) / N(ch))   (eps for N(ch) = 0);
//   expand = max_ch Q(ch) + expand_ratio * c * sqrt(ln(N(n) + 1)) / #children.
// The "expand here" action is a virtual child of every node: when it scores
// highest the descent stops and the caller grows the current node, so the
// tree widens where the best child is not much better than a fresh try.
//
// Not thread-safe: one owner (the orchestrator) mutates it under its own lock.
// Deterministic: the only randomness is the std::mt19937_64 the caller passes,
// drawn from with portable arithmetic (no <random> distributions), so a seed
// gives the same decisions on every platform.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ax::search {

// How a node was made. kRoot: the reference. kLarge: a new kernel written
// from scratch (shown a diverse pool). kSmall: exact edits to the parent.
enum class StepKind { kRoot, kLarge, kSmall };
const char* StepKindName(StepKind k);                    // "root", "large", "small"
std::optional<StepKind> ParseStepKind(std::string_view name);

// Statuses beyond the judge's: a proposal that produced nothing new to judge.
inline constexpr const char* kStatusDuplicate = "duplicate";      // same hash as a node already in the tree
inline constexpr const char* kStatusNoCandidate = "no_candidate"; // no code, or edits that did not apply

// What the judge said about one candidate, as plain data.
struct Outcome {
  // ok, compile_error, runtime_error, mismatch, timeout, crashed, rejected;
  // or duplicate / no_candidate (nothing was judged).
  std::string status;
  bool correct = false;
  double speedup = 0;      // vs eager PyTorch; 0 when not correct
  double runtime_ms = 0;   // 0 when not measured
  std::string error;       // short; what a reviser needs to see
  std::vector<std::string> flags;
  std::string profile;     // one line: the GPU profile's summary (empty: not profiled)
  // The profiled call's GPU kernels, longest first (empty: not profiled).
  struct KernelMs {
    std::string name;
    double ms = 0;
    bool operator==(const KernelMs&) const = default;
  };
  std::vector<KernelMs> kernels;

  bool operator==(const Outcome&) const = default;
  nlohmann::json ToJson() const;
  static Outcome FromJson(const nlohmann::json& j);  // missing keys keep defaults
};

// How a correct candidate's speedup becomes a reward. Both clip the speedup to
// [min_speedup, max_speedup] (default [0.1, 10]) and map onto
// [min_reward, max_reward] (default [0.4, 1.6]), so any correct kernel beats
// any wrong one:
//   kLinearClipped ("linear-clipped", default; the paper's public reference):
//       r = min_reward + (max_reward - min_reward) * (s - min_s) / (max_s - min_s)
//       Speedup 1.0 gives about 0.51; rewards differences among fast kernels.
//   kLogClipped ("log-clipped"): the same on ln(s), so every doubling of the
//       speedup is worth the same; speedup 1.0 gives 1.0 with the defaults.
//       Separates the many kernels around 0.5x-2x more than linear does.
enum class RewardMapping { kLinearClipped, kLogClipped };
const char* RewardMappingName(RewardMapping m);
std::optional<RewardMapping> ParseRewardMapping(std::string_view name);

struct RewardConfig {
  RewardMapping mapping = RewardMapping::kLinearClipped;
  double not_compiled = 0.0;    // compile_error, duplicate, no_candidate, unknown status
  double compiled_wrong = 0.1;  // runtime_error, mismatch, timeout, crashed, rejected, ok-but-not-correct
  double min_speedup = 0.1, max_speedup = 10.0;
  double min_reward = 0.4, max_reward = 1.6;

  bool operator==(const RewardConfig&) const = default;
};

// The reward of one outcome. A correct outcome is rewarded by its speedup
// whatever its status string; a NaN speedup counts as the lowest.
double Reward(const Outcome& o, const RewardConfig& cfg);

// The tunables of the search; defaults are the paper's.
struct SearchParams {
  double alpha = 0.5;        // Q = alpha * max + (1 - alpha) * mean, in [0, 1]
  double c = 0.3;            // UCT exploration weight, >= 0
  double expand_ratio = 1.0; // the expand action's exploration weight / c, >= 0
  int small_step_limit = 2;  // small-step children before a node must take large steps
  double p_large = 0.2;      // chance of a large step below that limit
  int pool_size = 5;         // kernels shown to a large step
  int path_window = 5;       // nodes shown to a small step's reviser
  RewardConfig reward;

  bool operator==(const SearchParams&) const = default;
  Status Validate() const;
  nlohmann::json ToJson() const;
  // Missing keys keep their defaults; wrong types or an unknown mapping fail.
  static Status FromJson(const nlohmann::json& j, SearchParams* out);
};

// Stands in for a child's zero visit count in UCT, so an unvisited child
// (judged but not yet backpropagated) scores huge instead of dividing by zero.
// Visited children use their count exactly: an only child visited once then
// ties exactly with the expand action, and the rng decides.
inline constexpr double kUctEps = 1e-9;

struct Node {
  int id = -1;
  int parent = -1;              // -1 for the root
  std::vector<int> children;    // in creation order
  int depth = 0;                // root 0
  StepKind kind = StepKind::kRoot;
  std::string source;           // the candidate (the reference, for the root)
  std::string hash;             // of the source, as the caller computes it
  Outcome outcome;              // meaningful once judged
  bool judged = false;          // SetOutcome was called
  int visits = 0;
  double total_reward = 0;
  double max_reward = 0;
  double reward = 0;            // this node's own reward, as last backpropagated
  int small_children = 0;       // children with kind kSmall (pending ones too)
  std::string note;             // free-form: guidance, a failed edit's error, ...
  nlohmann::json plan;          // the proposer's plan of the candidate (null: none)
  // Made by the warm-start proposer (the builtin compiler) before the search
  // proper: always a large-step child of the root. Such nodes are ordinary
  // candidates otherwise (they join pools, and small steps may refine them).
  bool warm_start = false;

  bool operator==(const Node&) const = default;
  // A node that can be descended into and grown: judged and holding a
  // candidate (not a duplicate / no_candidate record). The root always can.
  bool Expandable() const;
};

class Tree {
 public:
  explicit Tree(SearchParams params = {}) : params_(std::move(params)) {}

  const SearchParams& params() const { return params_; }

  // --- building ------------------------------------------------------------
  // Ids are dense and increasing (root 0); a parent's id is below its child's.
  // A bad id, a second root or a child before the root is a programming error
  // and throws (std::out_of_range / std::logic_error).
  int AddRoot(std::string reference_source, std::string hash = {});
  int AddChild(int parent, StepKind kind, std::string source, std::string hash,
               std::string note = {});
  void SetNote(int id, std::string note);
  void SetPlan(int id, nlohmann::json plan);
  // Marks a warm-start node; it must be a large-step child of the root
  // (anything else throws std::logic_error).
  void SetWarmStart(int id);
  // Records the verdict; marks the node judged. Does not backpropagate.
  void SetOutcome(int id, Outcome o);
  // Adds one visit with `reward` to the node and every ancestor up to the
  // root; also sets the node's own `reward`. Call once per candidate.
  void Backpropagate(int id, double reward);
  // SetOutcome + Backpropagate(Reward(o, params().reward)); returns the reward.
  double Record(int id, Outcome o);

  // --- decisions -----------------------------------------------------------
  double Q(int id) const;

  struct Selection {
    int node = -1;
  };
  // Descends from the root. At each node it scores every expandable child by
  // UCT against the virtual expand action and stops when expand wins or the
  // node has no expandable child. Exact ties (within 1e-12 relative) are
  // broken uniformly by `rng`, which is drawn from only on a tie.
  //  * Children not yet judged (pending, e.g. in flight in parallel) and
  //    duplicate / no_candidate records are skipped, but they count in the
  //    expand action's #children, which damps piling parallel expansions
  //    onto one node.
  //  * Failed candidates (compile errors, wrong results) stay selectable:
  //    a small step can fix them; their low Q makes that rare.
  // Throws std::logic_error without a root.
  Selection Select(std::mt19937_64& rng) const;

  // The root: always large. Elsewhere: large when the node already has
  // small_step_limit small-step children, else large with probability
  // p_large (one draw from rng), else small.
  StepKind ChooseStep(int node, std::mt19937_64& rng) const;

  // What a small step's reviser sees: the node and its ancestors, at most
  // path_window of them, stopping after (and including) the most recent
  // large-step node; never the root. Oldest first.
  std::vector<int> RecentPath(int node) const;

  // What a large step is shown: up to pool_size correct candidates, best
  // speedup first, never two with the same hash. Chosen for diversity: a
  // branch is a large-step node with its small-step descendants (small steps
  // straight under the root form the root's branch). First the best kernel of
  // each branch met on the path from `node` to the root, then the best of
  // every other branch, then the next best kernels overall; each tier by
  // speedup when it does not fit whole.
  std::vector<int> DiversePool(int node) const;

  // --- queries -------------------------------------------------------------
  // The first candidate with this hash (never the root; never for "").
  std::optional<int> FindByHash(const std::string& hash) const;
  // The k fastest correct candidates, fastest first (ties: lower id), one per
  // hash: the final re-timing's shortlist.
  std::vector<int> BestCorrect(size_t k) const;
  int best() const;  // the fastest correct candidate, or -1
  size_t size() const { return nodes_.size(); }
  const Node& node(int id) const;
  const std::vector<Node>& nodes() const { return nodes_; }

  // --- persistence -----------------------------------------------------------
  // Everything, params included: FromJson(ToJson()) == *this. Children,
  // depths and small-child counts are written for readers and checked on load.
  nlohmann::json ToJson() const;
  static Status TryFromJson(const nlohmann::json& j, Tree* out);
  static Tree FromJson(const nlohmann::json& j);  // throws std::invalid_argument

  bool operator==(const Tree& o) const { return params_ == o.params_ && nodes_ == o.nodes_; }

 private:
  Node& at(int id);
  // The node whose branch `id` belongs to: itself when it is large or the
  // root, else the head of its parent's branch.
  std::vector<int> BranchHeads() const;

  SearchParams params_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, int> by_hash_;  // first candidate per hash
};

// The generator's full state as text and back, so a resumed run continues
// the same random sequence. RestoreRng returns false on malformed text.
std::string SaveRng(const std::mt19937_64& rng);
bool RestoreRng(const std::string& state, std::mt19937_64* rng);

}  // namespace ax::search
