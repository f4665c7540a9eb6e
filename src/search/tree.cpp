#include "search/tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

namespace ax::search {

namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A uniform double in [0, 1) from the top 53 bits: the same on every platform,
// unlike std::uniform_real_distribution.
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Two scores count as tied when they agree to ~1e-12 relative; sums of the
// same terms in another order must not decide a selection.
bool NearlyEqual(double a, double b) {
  double scale = std::max({1.0, std::fabs(a), std::fabs(b)});
  return std::fabs(a - b) <= 1e-12 * scale;
}

// Numbers as JSON: non-finite values are written as null (nlohmann's choice)
// and read back as NaN.
double GetNumber(const json& j, const char* key, double def) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (it->is_null()) return kNaN;
  if (!it->is_number()) throw std::invalid_argument(std::string("'") + key + "' is not a number");
  return it->get<double>();
}

int GetInt(const json& j, const char* key, int def) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (!it->is_number_integer()) throw std::invalid_argument(std::string("'") + key + "' is not an integer");
  return it->get<int>();
}

bool GetBool(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (!it->is_boolean()) throw std::invalid_argument(std::string("'") + key + "' is not a boolean");
  return it->get<bool>();
}

std::string GetString(const json& j, const char* key, const std::string& def = {}) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (!it->is_string()) throw std::invalid_argument(std::string("'") + key + "' is not a string");
  return it->get<std::string>();
}

// The key under which two candidates count as the same kernel.
std::string IdentityKey(const Node& n) { return n.hash.empty() ? std::string("\0src:", 5) + n.source : n.hash; }

double SortableSpeedup(const Node& n) {
  double s = n.outcome.speedup;
  return std::isnan(s) ? -kInf : s;
}

}  // namespace

// ---------------------------------------------------------------- names

const char* StepKindName(StepKind k) {
  switch (k) {
    case StepKind::kRoot: return "root";
    case StepKind::kLarge: return "large";
    case StepKind::kSmall: return "small";
  }
  return "?";
}

std::optional<StepKind> ParseStepKind(std::string_view name) {
  if (name == "root") return StepKind::kRoot;
  if (name == "large") return StepKind::kLarge;
  if (name == "small") return StepKind::kSmall;
  return std::nullopt;
}

const char* RewardMappingName(RewardMapping m) {
  switch (m) {
    case RewardMapping::kLinearClipped: return "linear-clipped";
    case RewardMapping::kLogClipped: return "log-clipped";
  }
  return "?";
}

std::optional<RewardMapping> ParseRewardMapping(std::string_view name) {
  if (name == "linear-clipped") return RewardMapping::kLinearClipped;
  if (name == "log-clipped") return RewardMapping::kLogClipped;
  return std::nullopt;
}

// ---------------------------------------------------------------- Outcome

json Outcome::ToJson() const {
  json j = {{"status", status}, {"correct", correct}, {"speedup", speedup},
            {"runtime_ms", runtime_ms}, {"error", error}, {"flags", flags}};
  if (!profile.empty()) j["profile"] = profile;
  if (!kernels.empty()) {
    json ks = json::array();
    for (const auto& k : kernels) ks.push_back({k.name, k.ms});
    j["kernels"] = ks;
  }
  return j;
}

Outcome Outcome::FromJson(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("outcome is not an object");
  Outcome o;
  o.status = GetString(j, "status");
  o.correct = GetBool(j, "correct", false);
  o.speedup = GetNumber(j, "speedup", 0);
  o.runtime_ms = GetNumber(j, "runtime_ms", 0);
  o.error = GetString(j, "error");
  o.profile = GetString(j, "profile");
  if (auto it = j.find("kernels"); it != j.end()) {
    if (!it->is_array()) throw std::invalid_argument("'kernels' is not an array");
    for (const auto& k : *it) {
      if (!k.is_array() || k.size() != 2 || !k[0].is_string() || !k[1].is_number()) {
        throw std::invalid_argument("a kernel time is not [name, ms]");
      }
      o.kernels.push_back({k[0].get<std::string>(), k[1].get<double>()});
    }
  }
  if (auto it = j.find("flags"); it != j.end()) {
    if (!it->is_array()) throw std::invalid_argument("'flags' is not an array");
    for (const auto& f : *it) {
      if (!f.is_string()) throw std::invalid_argument("a flag is not a string");
      o.flags.push_back(f.get<std::string>());
    }
  }
  return o;
}

// ---------------------------------------------------------------- Reward

double Reward(const Outcome& o, const RewardConfig& cfg) {
  if (o.correct) {
    double s = std::isnan(o.speedup) ? cfg.min_speedup : o.speedup;
    s = std::clamp(s, cfg.min_speedup, cfg.max_speedup);
    double t = 0;  // position of s in the clipped range, 0..1
    switch (cfg.mapping) {
      case RewardMapping::kLinearClipped:
        t = (s - cfg.min_speedup) / (cfg.max_speedup - cfg.min_speedup);
        break;
      case RewardMapping::kLogClipped:
        t = (std::log(s) - std::log(cfg.min_speedup)) /
            (std::log(cfg.max_speedup) - std::log(cfg.min_speedup));
        break;
    }
    return cfg.min_reward + (cfg.max_reward - cfg.min_reward) * std::clamp(t, 0.0, 1.0);
  }
  const std::string& st = o.status;
  if (st == "ok" || st == "runtime_error" || st == "mismatch" || st == "timeout" ||
      st == "crashed" || st == "rejected")
    return cfg.compiled_wrong;
  // compile_error, duplicate, no_candidate, and anything unknown: nothing
  // runnable came out of the step.
  return cfg.not_compiled;
}

// ---------------------------------------------------------------- SearchParams

Status SearchParams::Validate() const {
  auto finite = [](double x) { return std::isfinite(x); };
  if (!finite(alpha) || alpha < 0 || alpha > 1) return Status::Error("alpha must be in [0, 1]");
  if (!finite(c) || c < 0) return Status::Error("c must be >= 0");
  if (!finite(expand_ratio) || expand_ratio < 0) return Status::Error("expand_ratio must be >= 0");
  if (small_step_limit < 0) return Status::Error("small_step_limit must be >= 0");
  if (!finite(p_large) || p_large < 0 || p_large > 1) return Status::Error("p_large must be in [0, 1]");
  if (pool_size < 0) return Status::Error("pool_size must be >= 0");
  if (path_window < 1) return Status::Error("path_window must be >= 1");
  const RewardConfig& r = reward;
  if (!finite(r.not_compiled) || !finite(r.compiled_wrong) || !finite(r.min_reward) ||
      !finite(r.max_reward) || !finite(r.min_speedup) || !finite(r.max_speedup))
    return Status::Error("reward numbers must be finite");
  if (r.min_speedup <= 0 || r.max_speedup <= r.min_speedup)
    return Status::Error("reward speedup range must satisfy 0 < min_speedup < max_speedup");
  if (r.max_reward < r.min_reward) return Status::Error("reward range must satisfy min_reward <= max_reward");
  return Status::Ok();
}

json SearchParams::ToJson() const {
  return {{"alpha", alpha},
          {"c", c},
          {"expand_ratio", expand_ratio},
          {"small_step_limit", small_step_limit},
          {"p_large", p_large},
          {"pool_size", pool_size},
          {"path_window", path_window},
          {"reward",
           {{"mapping", RewardMappingName(reward.mapping)},
            {"not_compiled", reward.not_compiled},
            {"compiled_wrong", reward.compiled_wrong},
            {"min_speedup", reward.min_speedup},
            {"max_speedup", reward.max_speedup},
            {"min_reward", reward.min_reward},
            {"max_reward", reward.max_reward}}}};
}

Status SearchParams::FromJson(const json& j, SearchParams* out) {
  if (!j.is_object()) return Status::Error("search params: not an object");
  SearchParams p;
  try {
    p.alpha = GetNumber(j, "alpha", p.alpha);
    p.c = GetNumber(j, "c", p.c);
    p.expand_ratio = GetNumber(j, "expand_ratio", p.expand_ratio);
    p.small_step_limit = GetInt(j, "small_step_limit", p.small_step_limit);
    p.p_large = GetNumber(j, "p_large", p.p_large);
    p.pool_size = GetInt(j, "pool_size", p.pool_size);
    p.path_window = GetInt(j, "path_window", p.path_window);
    if (auto it = j.find("reward"); it != j.end()) {
      if (!it->is_object()) return Status::Error("search params: 'reward' is not an object");
      RewardConfig& r = p.reward;
      if (it->contains("mapping")) {
        std::string name = GetString(*it, "mapping");
        auto m = ParseRewardMapping(name);
        if (!m) return Status::Error("search params: unknown reward mapping '" + name +
                                     "' (linear-clipped, log-clipped)");
        r.mapping = *m;
      }
      r.not_compiled = GetNumber(*it, "not_compiled", r.not_compiled);
      r.compiled_wrong = GetNumber(*it, "compiled_wrong", r.compiled_wrong);
      r.min_speedup = GetNumber(*it, "min_speedup", r.min_speedup);
      r.max_speedup = GetNumber(*it, "max_speedup", r.max_speedup);
      r.min_reward = GetNumber(*it, "min_reward", r.min_reward);
      r.max_reward = GetNumber(*it, "max_reward", r.max_reward);
    }
  } catch (const std::exception& e) {
    return Status::Error(std::string("search params: ") + e.what());
  }
  *out = p;
  return Status::Ok();
}

// ---------------------------------------------------------------- Node

bool Node::Expandable() const {
  if (kind == StepKind::kRoot) return true;
  return judged && outcome.status != kStatusDuplicate && outcome.status != kStatusNoCandidate;
}

// ---------------------------------------------------------------- building

Node& Tree::at(int id) {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size())
    throw std::out_of_range("search tree: no node " + std::to_string(id));
  return nodes_[id];
}

const Node& Tree::node(int id) const {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size())
    throw std::out_of_range("search tree: no node " + std::to_string(id));
  return nodes_[id];
}

int Tree::AddRoot(std::string reference_source, std::string hash) {
  if (!nodes_.empty()) throw std::logic_error("search tree: the root already exists");
  Node n;
  n.id = 0;
  n.kind = StepKind::kRoot;
  n.source = std::move(reference_source);
  n.hash = std::move(hash);
  nodes_.push_back(std::move(n));
  return 0;
}

int Tree::AddChild(int parent, StepKind kind, std::string source, std::string hash, std::string note) {
  if (kind == StepKind::kRoot) throw std::logic_error("search tree: a child cannot be a root");
  Node& p = at(parent);
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.parent = parent;
  n.depth = p.depth + 1;
  n.kind = kind;
  n.source = std::move(source);
  n.hash = std::move(hash);
  n.note = std::move(note);
  p.children.push_back(n.id);
  if (kind == StepKind::kSmall) p.small_children++;
  if (!n.hash.empty()) by_hash_.emplace(n.hash, n.id);  // keeps the first
  int id = n.id;
  nodes_.push_back(std::move(n));  // `p` may dangle from here on
  return id;
}

void Tree::SetNote(int id, std::string note) { at(id).note = std::move(note); }

void Tree::SetPlan(int id, json plan) { at(id).plan = std::move(plan); }

void Tree::SetWarmStart(int id) {
  Node& n = at(id);
  if (n.parent != 0 || n.kind != StepKind::kLarge)
    throw std::logic_error("search tree: a warm-start node must be a large-step child of the root");
  n.warm_start = true;
}

void Tree::SetOutcome(int id, Outcome o) {
  Node& n = at(id);
  n.outcome = std::move(o);
  n.judged = true;
}

void Tree::Backpropagate(int id, double reward) {
  at(id).reward = reward;
  for (int v = id; v != -1; v = nodes_[v].parent) {
    Node& n = nodes_[v];
    n.max_reward = n.visits == 0 ? reward : std::max(n.max_reward, reward);
    n.visits++;
    n.total_reward += reward;
  }
}

double Tree::Record(int id, Outcome o) {
  double r = Reward(o, params_.reward);
  SetOutcome(id, std::move(o));
  Backpropagate(id, r);
  return r;
}

// ---------------------------------------------------------------- decisions

double Tree::Q(int id) const {
  const Node& n = node(id);
  if (n.visits == 0) return 0;
  return params_.alpha * n.max_reward + (1 - params_.alpha) * (n.total_reward / n.visits);
}

Tree::Selection Tree::Select(std::mt19937_64& rng) const {
  if (nodes_.empty()) throw std::logic_error("search tree: Select needs a root");
  const double c = params_.c;
  const double expand_weight = params_.expand_ratio * params_.c;
  std::vector<int> options;  // children ids, or -1 for "expand here"
  std::vector<double> scores;
  int v = 0;
  for (;;) {
    const Node& n = nodes_[v];
    options.clear();
    scores.clear();
    const double ln_n = std::log(static_cast<double>(n.visits) + 1.0);
    double best_q = -kInf;
    for (int ch : n.children) {
      const Node& child = nodes_[ch];
      if (!child.Expandable()) continue;
      double q = Q(ch);
      best_q = std::max(best_q, q);
      options.push_back(ch);
      // eps only stands in for zero visits, so that exact ties (an only child
      // visited once against the expand action) stay exact and go to the rng.
      double n_child = child.visits > 0 ? static_cast<double>(child.visits) : kUctEps;
      scores.push_back(q + c * std::sqrt(ln_n / n_child));
    }
    if (options.empty()) return {v};
    // With no exploration weight the expand action could only tie the best
    // child, never beat it: the reference then never expands, and neither do we.
    if (expand_weight > 0) {
      options.push_back(-1);
      scores.push_back(best_q + expand_weight * std::sqrt(ln_n) / static_cast<double>(n.children.size()));
    }
    double top = *std::max_element(scores.begin(), scores.end());
    std::vector<int> tied;
    for (size_t i = 0; i < options.size(); ++i)
      if (NearlyEqual(scores[i], top)) tied.push_back(options[i]);
    int pick = tied.size() == 1 ? tied[0] : tied[rng() % tied.size()];
    if (pick == -1) return {v};
    v = pick;
  }
}

StepKind Tree::ChooseStep(int id, std::mt19937_64& rng) const {
  const Node& n = node(id);
  if (n.kind == StepKind::kRoot) return StepKind::kLarge;
  if (n.small_children >= params_.small_step_limit) return StepKind::kLarge;
  return Uniform01(rng) < params_.p_large ? StepKind::kLarge : StepKind::kSmall;
}

std::vector<int> Tree::RecentPath(int id) const {
  node(id);  // bounds check
  std::vector<int> path;
  for (int v = id; v != -1 && static_cast<int>(path.size()) < params_.path_window; v = nodes_[v].parent) {
    const Node& n = nodes_[v];
    if (n.kind == StepKind::kRoot) break;
    path.push_back(v);
    if (n.kind == StepKind::kLarge) break;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int> Tree::BranchHeads() const {
  std::vector<int> head(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {  // parents come before children
    const Node& n = nodes_[i];
    head[i] = n.kind == StepKind::kSmall ? head[n.parent] : static_cast<int>(i);
  }
  return head;
}

namespace {

bool IsCorrectCandidate(const Node& n) { return n.kind != StepKind::kRoot && n.judged && n.outcome.correct; }

// Fastest first; equal speedups: the older node first.
struct Faster {
  const std::vector<Node>* nodes;
  bool operator()(int a, int b) const {
    double sa = SortableSpeedup((*nodes)[a]), sb = SortableSpeedup((*nodes)[b]);
    if (sa != sb) return sa > sb;
    return a < b;
  }
};

}  // namespace

std::vector<int> Tree::DiversePool(int id) const {
  node(id);  // bounds check
  const size_t limit = static_cast<size_t>(std::max(0, params_.pool_size));
  std::vector<int> chosen;
  if (limit == 0) return chosen;
  Faster faster{&nodes_};

  const std::vector<int> head = BranchHeads();
  std::vector<int> branch_best(nodes_.size(), -1);  // by head
  std::vector<int> correct;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!IsCorrectCandidate(nodes_[i])) continue;
    int h = head[i], me = static_cast<int>(i);
    correct.push_back(me);
    if (branch_best[h] == -1 || faster(me, branch_best[h])) branch_best[h] = me;
  }

  std::vector<bool> on_path(nodes_.size(), false);
  for (int v = id; v != -1; v = nodes_[v].parent) on_path[head[v]] = true;

  std::vector<int> path_tier, other_tier;
  for (size_t h = 0; h < nodes_.size(); ++h) {
    if (branch_best[h] == -1) continue;
    (on_path[h] ? path_tier : other_tier).push_back(branch_best[h]);
  }

  std::unordered_set<std::string> seen;
  std::vector<bool> taken(nodes_.size(), false);
  auto take_from = [&](std::vector<int>& tier) {
    std::sort(tier.begin(), tier.end(), faster);
    for (int c : tier) {
      if (chosen.size() >= limit) return;
      if (taken[c] || !seen.insert(IdentityKey(nodes_[c])).second) continue;
      taken[c] = true;
      chosen.push_back(c);
    }
  };
  take_from(path_tier);
  take_from(other_tier);
  take_from(correct);
  std::sort(chosen.begin(), chosen.end(), faster);
  return chosen;
}

// ---------------------------------------------------------------- queries

std::optional<int> Tree::FindByHash(const std::string& hash) const {
  if (hash.empty()) return std::nullopt;
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

std::vector<int> Tree::BestCorrect(size_t k) const {
  std::vector<int> correct;
  for (const Node& n : nodes_)
    if (IsCorrectCandidate(n)) correct.push_back(n.id);
  std::sort(correct.begin(), correct.end(), Faster{&nodes_});
  std::vector<int> out;
  std::unordered_set<std::string> seen;
  for (int id : correct) {
    if (out.size() >= k) break;
    if (seen.insert(IdentityKey(nodes_[id])).second) out.push_back(id);
  }
  return out;
}

int Tree::best() const {
  auto b = BestCorrect(1);
  return b.empty() ? -1 : b[0];
}

// ---------------------------------------------------------------- persistence

json Tree::ToJson() const {
  json nodes = json::array();
  for (const Node& n : nodes_) {
    nodes.push_back({{"id", n.id},
                     {"parent", n.parent},
                     {"kind", StepKindName(n.kind)},
                     {"depth", n.depth},
                     {"children", n.children},
                     {"small_children", n.small_children},
                     {"source", n.source},
                     {"hash", n.hash},
                     {"note", n.note},
                     {"judged", n.judged},
                     {"outcome", n.outcome.ToJson()},
                     {"visits", n.visits},
                     {"total_reward", n.total_reward},
                     {"max_reward", n.max_reward},
                     {"reward", n.reward}});
    // Written only when set, so trees without a warm start read as before.
    if (n.warm_start) nodes.back()["warm_start"] = true;
    if (!n.plan.is_null()) nodes.back()["plan"] = n.plan;
  }
  return {{"format", "adaexplore.search_tree"}, {"version", 1}, {"params", params_.ToJson()}, {"nodes", nodes}};
}

Status Tree::TryFromJson(const json& j, Tree* out) {
  if (!j.is_object()) return Status::Error("search tree: not an object");
  if (j.value("format", std::string()) != "adaexplore.search_tree")
    return Status::Error("search tree: format is not adaexplore.search_tree");
  if (j.value("version", 0) != 1) return Status::Error("search tree: unsupported version");
  SearchParams params;
  if (j.contains("params")) {
    Status st = SearchParams::FromJson(j["params"], &params);
    if (!st.ok()) return st;
  }
  if (!j.contains("nodes") || !j["nodes"].is_array()) return Status::Error("search tree: 'nodes' is not an array");

  Tree t(params);
  try {
    const json& arr = j["nodes"];
    for (size_t i = 0; i < arr.size(); ++i) {
      const json& jn = arr[i];
      const std::string where = "search tree: node " + std::to_string(i) + ": ";
      if (!jn.is_object()) return Status::Error(where + "not an object");
      if (GetInt(jn, "id", -1) != static_cast<int>(i)) return Status::Error(where + "ids must be 0, 1, 2, ...");
      auto kind = ParseStepKind(GetString(jn, "kind"));
      if (!kind) return Status::Error(where + "unknown kind");
      int parent = GetInt(jn, "parent", -2);
      int id;
      if (i == 0) {
        if (*kind != StepKind::kRoot || parent != -1) return Status::Error(where + "the first node must be the root");
        id = t.AddRoot(GetString(jn, "source"), GetString(jn, "hash"));
        t.SetNote(id, GetString(jn, "note"));
      } else {
        if (*kind == StepKind::kRoot) return Status::Error(where + "a second root");
        if (parent < 0 || parent >= static_cast<int>(i)) return Status::Error(where + "bad parent");
        id = t.AddChild(parent, *kind, GetString(jn, "source"), GetString(jn, "hash"), GetString(jn, "note"));
      }
      if (GetBool(jn, "warm_start", false)) {
        if (parent != 0 || *kind != StepKind::kLarge)
          return Status::Error(where + "a warm-start node must be a large-step child of the root");
        t.SetWarmStart(id);
      }
      Node& n = t.nodes_[id];
      if (auto it = jn.find("plan"); it != jn.end()) n.plan = *it;
      n.judged = GetBool(jn, "judged", false);
      if (auto it = jn.find("outcome"); it != jn.end()) n.outcome = Outcome::FromJson(*it);
      n.visits = GetInt(jn, "visits", 0);
      n.total_reward = GetNumber(jn, "total_reward", 0);
      n.max_reward = GetNumber(jn, "max_reward", 0);
      n.reward = GetNumber(jn, "reward", 0);
      if (GetInt(jn, "depth", n.depth) != n.depth) return Status::Error(where + "depth disagrees with parents");
    }
    // Children and small-child counts are rebuilt from the parents; what the
    // file says must agree.
    for (size_t i = 0; i < arr.size(); ++i) {
      const json& jn = arr[i];
      const Node& n = t.nodes_[i];
      const std::string where = "search tree: node " + std::to_string(i) + ": ";
      if (jn.contains("children") && jn["children"] != json(n.children))
        return Status::Error(where + "children disagree with parents");
      if (GetInt(jn, "small_children", n.small_children) != n.small_children)
        return Status::Error(where + "small_children disagrees with children");
    }
  } catch (const std::exception& e) {
    return Status::Error(std::string("search tree: ") + e.what());
  }
  *out = std::move(t);
  return Status::Ok();
}

Tree Tree::FromJson(const json& j) {
  Tree t;
  Status st = TryFromJson(j, &t);
  if (!st.ok()) throw std::invalid_argument(st.message());
  return t;
}

// ---------------------------------------------------------------- rng

std::string SaveRng(const std::mt19937_64& rng) {
  std::ostringstream os;
  os << rng;
  return os.str();
}

bool RestoreRng(const std::string& state, std::mt19937_64* rng) {
  std::istringstream is(state);
  std::mt19937_64 r;
  is >> r;
  if (is.fail()) return false;
  *rng = r;
  return true;
}

}  // namespace ax::search
