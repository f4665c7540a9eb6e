// Unit tests of the search tree: reward, Q, selection, step choice,
// backpropagation, recent paths, diverse pools, lookups and persistence, on
// hand-built trees; and a small simulated search with a fake judge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "search/tree.h"

namespace ax::search {
namespace {

using nlohmann::json;

Outcome Correct(double speedup, double runtime_ms = 1.0) {
  Outcome o;
  o.status = "ok";
  o.correct = true;
  o.speedup = speedup;
  o.runtime_ms = runtime_ms;
  return o;
}

Outcome Failed(const std::string& status, const std::string& error = "boom") {
  Outcome o;
  o.status = status;
  o.error = error;
  return o;
}

// Adds a judged, backpropagated child whose hash is "h:" + source.
int Add(Tree& t, int parent, StepKind kind, const std::string& source, const Outcome& o) {
  int id = t.AddChild(parent, kind, source, "h:" + source);
  t.Record(id, o);
  return id;
}

std::vector<int> Ids(std::initializer_list<int> l) { return std::vector<int>(l); }

// ================================================================ Reward

TEST(Reward, LinearClippedDefaults) {
  RewardConfig cfg;
  EXPECT_EQ(cfg.mapping, RewardMapping::kLinearClipped);
  EXPECT_DOUBLE_EQ(Reward(Correct(0.1), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(10.0), cfg), 1.6);
  EXPECT_NEAR(Reward(Correct(1.0), cfg), 0.4 + 1.2 * 0.9 / 9.9, 1e-12);
  EXPECT_NEAR(Reward(Correct(5.05), cfg), 1.0, 1e-12);  // the middle of [0.1, 10]
}

TEST(Reward, LinearClippedClipsAtBothEnds) {
  RewardConfig cfg;
  EXPECT_DOUBLE_EQ(Reward(Correct(0.01), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(0.0), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(-3.0), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(11.0), cfg), 1.6);
  EXPECT_DOUBLE_EQ(Reward(Correct(1e9), cfg), 1.6);
  EXPECT_DOUBLE_EQ(Reward(Correct(std::numeric_limits<double>::infinity()), cfg), 1.6);
  EXPECT_DOUBLE_EQ(Reward(Correct(std::numeric_limits<double>::quiet_NaN()), cfg), 0.4);
}

TEST(Reward, LogClipped) {
  RewardConfig cfg;
  cfg.mapping = RewardMapping::kLogClipped;
  EXPECT_DOUBLE_EQ(Reward(Correct(0.1), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(10.0), cfg), 1.6);
  EXPECT_NEAR(Reward(Correct(1.0), cfg), 1.0, 1e-12);
  EXPECT_NEAR(Reward(Correct(std::sqrt(10.0)), cfg), 1.3, 1e-12);
  EXPECT_NEAR(Reward(Correct(2.0), cfg) - Reward(Correct(1.0), cfg),
              Reward(Correct(4.0), cfg) - Reward(Correct(2.0), cfg), 1e-12);  // each doubling the same
  EXPECT_DOUBLE_EQ(Reward(Correct(0.001), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(0.0), cfg), 0.4);
  EXPECT_DOUBLE_EQ(Reward(Correct(1000.0), cfg), 1.6);
}

TEST(Reward, MonotoneInSpeedupForBothMappings) {
  for (auto m : {RewardMapping::kLinearClipped, RewardMapping::kLogClipped}) {
    RewardConfig cfg;
    cfg.mapping = m;
    double prev = -1;
    for (double s = 0.01; s < 20; s *= 1.1) {
      double r = Reward(Correct(s), cfg);
      EXPECT_GE(r, prev) << RewardMappingName(m) << " at " << s;
      EXPECT_GE(r, cfg.min_reward);
      EXPECT_LE(r, cfg.max_reward);
      prev = r;
    }
  }
}

TEST(Reward, EachStatus) {
  RewardConfig cfg;
  EXPECT_EQ(Reward(Failed("compile_error"), cfg), 0.0);
  EXPECT_EQ(Reward(Failed(kStatusDuplicate), cfg), 0.0);
  EXPECT_EQ(Reward(Failed(kStatusNoCandidate), cfg), 0.0);
  EXPECT_EQ(Reward(Failed(""), cfg), 0.0);
  EXPECT_EQ(Reward(Failed("something_new"), cfg), 0.0);
  for (const char* s : {"runtime_error", "mismatch", "timeout", "crashed", "rejected"})
    EXPECT_DOUBLE_EQ(Reward(Failed(s), cfg), 0.1) << s;
  EXPECT_DOUBLE_EQ(Reward(Failed("ok"), cfg), 0.1);  // ran, but not correct
  // Any correct kernel beats any wrong one.
  EXPECT_GT(Reward(Correct(0.001), cfg), Reward(Failed("mismatch"), cfg));

  RewardConfig custom;
  custom.compiled_wrong = 0.05;
  custom.not_compiled = -0.2;
  EXPECT_DOUBLE_EQ(Reward(Failed("timeout"), custom), 0.05);
  EXPECT_DOUBLE_EQ(Reward(Failed("compile_error"), custom), -0.2);
}

TEST(Reward, MappingNames) {
  EXPECT_EQ(ParseRewardMapping("linear-clipped"), RewardMapping::kLinearClipped);
  EXPECT_EQ(ParseRewardMapping("log-clipped"), RewardMapping::kLogClipped);
  EXPECT_FALSE(ParseRewardMapping("linear"));
  EXPECT_STREQ(RewardMappingName(RewardMapping::kLogClipped), "log-clipped");
  for (auto k : {StepKind::kRoot, StepKind::kLarge, StepKind::kSmall})
    EXPECT_EQ(ParseStepKind(StepKindName(k)), k);
  EXPECT_FALSE(ParseStepKind("medium"));
}

// ================================================================ SearchParams

TEST(SearchParams, DefaultsAreThePapers) {
  SearchParams p;
  EXPECT_DOUBLE_EQ(p.alpha, 0.5);
  EXPECT_DOUBLE_EQ(p.c, 0.3);
  EXPECT_DOUBLE_EQ(p.expand_ratio, 1.0);
  EXPECT_EQ(p.small_step_limit, 2);
  EXPECT_DOUBLE_EQ(p.p_large, 0.2);
  EXPECT_EQ(p.pool_size, 5);
  EXPECT_EQ(p.path_window, 5);
  EXPECT_TRUE(p.Validate().ok());
}

TEST(SearchParams, ValidateRejectsNonsense) {
  auto bad = [](auto mutate) {
    SearchParams p;
    mutate(p);
    return !p.Validate().ok();
  };
  EXPECT_TRUE(bad([](SearchParams& p) { p.alpha = 1.5; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.c = -0.1; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.expand_ratio = -1; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.p_large = 2; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.path_window = 0; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.pool_size = -1; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.small_step_limit = -1; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.reward.min_speedup = 0; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.reward.max_speedup = 0.05; }));
  EXPECT_TRUE(bad([](SearchParams& p) { p.c = std::numeric_limits<double>::quiet_NaN(); }));
}

TEST(SearchParams, JsonRoundTripAndPartialInput) {
  SearchParams p;
  p.alpha = 0.9;
  p.c = 0.25;
  p.pool_size = 3;
  p.reward.mapping = RewardMapping::kLogClipped;
  p.reward.compiled_wrong = 0.05;
  SearchParams q;
  ASSERT_TRUE(SearchParams::FromJson(json::parse(p.ToJson().dump()), &q).ok());
  EXPECT_EQ(p, q);
  EXPECT_EQ(p.ToJson()["reward"]["mapping"], "log-clipped");

  SearchParams partial;
  ASSERT_TRUE(SearchParams::FromJson(json{{"c", 1.0}, {"reward", {{"compiled_wrong", 0.2}}}}, &partial).ok());
  SearchParams expect;
  expect.c = 1.0;
  expect.reward.compiled_wrong = 0.2;
  EXPECT_EQ(partial, expect);

  SearchParams untouched;
  EXPECT_FALSE(SearchParams::FromJson(json{{"reward", {{"mapping", "cubic"}}}}, &untouched).ok());
  EXPECT_FALSE(SearchParams::FromJson(json{{"c", "big"}}, &untouched).ok());
  EXPECT_FALSE(SearchParams::FromJson(json{{"pool_size", 2.5}}, &untouched).ok());
  EXPECT_EQ(untouched, SearchParams());
}

// ================================================================ building, Q, backpropagation

TEST(Tree, BuildingKeepsStructure) {
  Tree t;
  EXPECT_EQ(t.AddRoot("class Model: ..."), 0);
  int a = t.AddChild(0, StepKind::kLarge, "A", "ha", "write it in triton");
  int b = t.AddChild(a, StepKind::kSmall, "B", "hb");
  int c = t.AddChild(a, StepKind::kSmall, "C", "hc");
  int d = t.AddChild(a, StepKind::kLarge, "D", "hd");
  EXPECT_EQ(t.size(), 5u);
  EXPECT_EQ(t.node(0).kind, StepKind::kRoot);
  EXPECT_EQ(t.node(0).parent, -1);
  EXPECT_EQ(t.node(a).children, Ids({b, c, d}));
  EXPECT_EQ(t.node(a).small_children, 2);
  EXPECT_EQ(t.node(0).small_children, 0);
  EXPECT_EQ(t.node(b).depth, 2);
  EXPECT_EQ(t.node(a).note, "write it in triton");
  EXPECT_FALSE(t.node(b).judged);
  t.SetNote(b, "edit failed: old text not found");
  EXPECT_EQ(t.node(b).note, "edit failed: old text not found");

  EXPECT_THROW(t.AddRoot("again"), std::logic_error);
  EXPECT_THROW(t.AddChild(99, StepKind::kSmall, "x", "hx"), std::out_of_range);
  EXPECT_THROW(t.AddChild(0, StepKind::kRoot, "x", "hx"), std::logic_error);
  EXPECT_THROW(t.node(-1), std::out_of_range);
  Tree empty;
  EXPECT_THROW(empty.AddChild(0, StepKind::kLarge, "x", "hx"), std::out_of_range);
}

TEST(Tree, QBlendsMaxAndMean) {
  for (double alpha : {0.0, 0.5, 1.0}) {
    SearchParams p;
    p.alpha = alpha;
    Tree t(p);
    t.AddRoot("ref");
    int a = t.AddChild(0, StepKind::kLarge, "A", "ha");
    EXPECT_EQ(t.Q(a), 0.0);  // unvisited
    t.Backpropagate(a, 1.0);
    t.Backpropagate(a, 0.0);
    t.Backpropagate(a, 0.5);
    // max 1.0, mean 0.5
    EXPECT_NEAR(t.Q(a), alpha * 1.0 + (1 - alpha) * 0.5, 1e-12) << alpha;
  }
}

TEST(Tree, BackpropagateUpdatesEveryAncestor) {
  Tree t;
  t.AddRoot("ref");
  int a = t.AddChild(0, StepKind::kLarge, "A", "ha");
  int b = t.AddChild(a, StepKind::kSmall, "B", "hb");
  int c = t.AddChild(b, StepKind::kSmall, "C", "hc");
  int side = t.AddChild(0, StepKind::kLarge, "S", "hs");
  t.Backpropagate(c, 0.7);
  for (int id : {0, a, b, c}) {
    EXPECT_EQ(t.node(id).visits, 1) << id;
    EXPECT_DOUBLE_EQ(t.node(id).total_reward, 0.7);
    EXPECT_DOUBLE_EQ(t.node(id).max_reward, 0.7);
  }
  EXPECT_EQ(t.node(side).visits, 0);
  EXPECT_DOUBLE_EQ(t.node(c).reward, 0.7);
  t.Backpropagate(b, 0.2);
  EXPECT_EQ(t.node(c).visits, 1);
  EXPECT_EQ(t.node(b).visits, 2);
  EXPECT_DOUBLE_EQ(t.node(b).total_reward, 0.9);
  EXPECT_DOUBLE_EQ(t.node(b).max_reward, 0.7);
  EXPECT_DOUBLE_EQ(t.node(b).reward, 0.2);
  EXPECT_EQ(t.node(0).visits, 2);
  EXPECT_DOUBLE_EQ(t.node(0).max_reward, 0.7);
  EXPECT_EQ(t.node(side).visits, 0);
}

TEST(Tree, BackpropagateFirstRewardSetsMaxEvenWhenNegative) {
  Tree t;
  t.AddRoot("ref");
  int a = t.AddChild(0, StepKind::kLarge, "A", "ha");
  t.Backpropagate(a, -0.3);
  EXPECT_DOUBLE_EQ(t.node(a).max_reward, -0.3);
  EXPECT_DOUBLE_EQ(t.node(0).max_reward, -0.3);
}

TEST(Tree, RecordSetsOutcomeAndBackpropagatesItsReward) {
  Tree t;
  t.AddRoot("ref");
  int a = t.AddChild(0, StepKind::kLarge, "A", "ha");
  double r = t.Record(a, Correct(10.0));
  EXPECT_DOUBLE_EQ(r, 1.6);
  EXPECT_TRUE(t.node(a).judged);
  EXPECT_EQ(t.node(a).outcome, Correct(10.0));
  EXPECT_DOUBLE_EQ(t.node(a).reward, 1.6);
  EXPECT_EQ(t.node(0).visits, 1);
  // The root is not a candidate: no verdict of its own.
  EXPECT_FALSE(t.node(0).judged);
}

// ================================================================ selection

TEST(Select, LoneRootIsSelected) {
  Tree t;
  t.AddRoot("ref");
  std::mt19937_64 rng(1);
  EXPECT_EQ(t.Select(rng).node, 0);
  Tree empty;
  EXPECT_THROW(empty.Select(rng), std::logic_error);
}

TEST(Select, PendingAndNothingNewChildrenAreNotEntered) {
  Tree t;
  t.AddRoot("ref");
  t.AddChild(0, StepKind::kLarge, "pending", "hp");  // in flight: not judged yet
  int dup = t.AddChild(0, StepKind::kLarge, "", "");
  t.Record(dup, Failed(kStatusDuplicate));
  int none = t.AddChild(0, StepKind::kLarge, "", "");
  t.Record(none, Failed(kStatusNoCandidate));
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::mt19937_64 rng(seed);
    EXPECT_EQ(t.Select(rng).node, 0);
  }
}

TEST(Select, PicksTheBetterChild) {
  Tree t;
  t.AddRoot("ref");
  int good = Add(t, 0, StepKind::kLarge, "good", Correct(5.0));
  Add(t, 0, StepKind::kLarge, "bad", Failed("compile_error"));
  // root N=2: UCT(good) = Q + c*sqrt(ln3) beats expand = Q + c*sqrt(ln3)/2
  // and UCT(bad) = 0 + c*sqrt(ln3).
  std::mt19937_64 rng(3);
  EXPECT_EQ(t.Select(rng).node, good);
}

TEST(Select, DescendsSeveralLevels) {
  Tree t;
  t.AddRoot("ref");
  int a = Add(t, 0, StepKind::kLarge, "A", Correct(10.0));       // 1.6
  Add(t, 0, StepKind::kLarge, "B", Failed("compile_error"));     // 0
  int a1 = Add(t, a, StepKind::kSmall, "A1", Correct(10.0));     // 1.6
  Add(t, a, StepKind::kSmall, "A2", Failed("compile_error"));    // 0
  // Root (N=4, ln5=1.609): Q(A) = 0.5*1.6 + 0.5*3.2/3 = 1.333;
  //   UCT(A) = 1.333 + 0.3*sqrt(1.609/3) = 1.553 > expand = 1.333 + 0.3*1.269/2 = 1.524.
  // A (N=3, ln4=1.386): UCT(A1) = 1.6 + 0.3*1.177 = 1.953 > expand = 1.6 + 0.3*1.177/2 = 1.777.
  // A1 has no children: selected.
  std::mt19937_64 rng(5);
  EXPECT_EQ(t.Select(rng).node, a1);
}

// With a single child the expand action's Q is that child's Q, so the
// child's strength cancels out and its visits decide: visited once it ties
// with expand (rng decides), visited more and expand wins.
TEST(Select, ExpandWinsOverAWellVisitedOnlyChild) {
  for (auto o : {Failed("mismatch"), Correct(10.0)}) {
    Tree t;
    t.AddRoot("ref");
    int a = t.AddChild(0, StepKind::kLarge, "A", "ha");
    t.SetOutcome(a, o);
    for (int i = 0; i < 10; ++i) t.Backpropagate(a, Reward(o, t.params().reward));
    for (uint64_t seed = 0; seed < 20; ++seed) {
      std::mt19937_64 rng(seed);
      EXPECT_EQ(t.Select(rng).node, 0) << o.status;
    }
  }
}

TEST(Select, OnlyChildVisitedOnceTiesWithExpandAndRngBreaksIt) {
  Tree t;
  t.AddRoot("ref");
  // A failed candidate: still selectable, a small step may fix it.
  int f = Add(t, 0, StepKind::kLarge, "F", Failed("compile_error"));
  std::set<int> picked;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    std::mt19937_64 rng(seed), again(seed);
    int n = t.Select(rng).node;
    EXPECT_EQ(n, t.Select(again).node);  // same seed, same choice
    picked.insert(n);
  }
  EXPECT_EQ(picked, (std::set<int>{0, f}));
}

TEST(Select, ExpandLosesToAStrongChildAmongSeveral) {
  Tree t;
  t.AddRoot("ref");
  int strong = Add(t, 0, StepKind::kLarge, "S", Correct(10.0));
  Add(t, 0, StepKind::kLarge, "W1", Failed("compile_error"));
  Add(t, 0, StepKind::kLarge, "W2", Failed("mismatch"));
  // UCT(S) = 1.6 + c*sqrt(ln4) beats expand = 1.6 + c*sqrt(ln4)/3.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    EXPECT_EQ(t.Select(rng).node, strong);
  }
}

TEST(Select, ExpandWinsWhenTheStrongChildIsExhausted) {
  Tree t;
  t.AddRoot("ref");
  int strong = Add(t, 0, StepKind::kLarge, "S", Correct(10.0));
  Add(t, 0, StepKind::kLarge, "W", Failed("mismatch"));
  for (int i = 0; i < 30; ++i) t.Backpropagate(strong, 1.6);
  // Root N=32: UCT(S) = 1.6 + 0.3*sqrt(ln33/31) = 1.6 + 0.1008;
  // expand = 1.6 + 0.3*sqrt(ln33)/2 = 1.6 + 0.2798; UCT(W) = 0.1 + 0.561.
  std::mt19937_64 rng(9);
  EXPECT_EQ(t.Select(rng).node, 0);
}

TEST(Select, PendingChildrenDampTheExpandAction) {
  Tree t;
  t.AddRoot("ref");
  int a = Add(t, 0, StepKind::kLarge, "A", Correct(2.0));
  for (int i = 0; i < 3; ++i) t.Backpropagate(a, t.node(a).reward);
  // Root N=4, ln5: UCT(A) = Q + 0.3*sqrt(1.609/4) = Q + 0.190; expand = Q + 0.3*1.269/k.
  std::mt19937_64 rng(1);
  EXPECT_EQ(t.Select(rng).node, 0);  // k=1: expand (+0.381) wins
  t.AddChild(0, StepKind::kLarge, "P1", "hp1");
  t.AddChild(0, StepKind::kLarge, "P2", "hp2");
  EXPECT_EQ(t.Select(rng).node, a);  // k=3: expand (+0.127) loses
}

TEST(Select, ZeroExplorationNeverExpandsANodeWithChildren) {
  SearchParams p;
  p.c = 0;
  Tree t(p);
  t.AddRoot("ref");
  int a = Add(t, 0, StepKind::kLarge, "A", Correct(2.0));
  for (int i = 0; i < 10; ++i) t.Backpropagate(a, t.node(a).reward);
  std::mt19937_64 rng(1);
  EXPECT_EQ(t.Select(rng).node, a);
}

TEST(Select, UnvisitedJudgedChildIsTriedFirst) {
  Tree t;
  t.AddRoot("ref");
  Add(t, 0, StepKind::kLarge, "A", Correct(10.0));
  int b = t.AddChild(0, StepKind::kLarge, "B", "hb");
  t.SetOutcome(b, Failed("mismatch"));  // judged, reward not yet backpropagated
  std::mt19937_64 rng(1);
  EXPECT_EQ(t.Select(rng).node, b);
}

// ================================================================ step choice

TEST(ChooseStep, RootAlwaysTakesALargeStep) {
  SearchParams p;
  p.p_large = 0;
  Tree t(p);
  t.AddRoot("ref");
  for (int i = 0; i < 3; ++i) t.AddChild(0, StepKind::kSmall, "s" + std::to_string(i), "");
  for (uint64_t seed = 0; seed < 100; ++seed) {
    std::mt19937_64 rng(seed);
    EXPECT_EQ(t.ChooseStep(0, rng), StepKind::kLarge);
  }
}

TEST(ChooseStep, SmallStepLimitForcesLarge) {
  SearchParams p;
  p.p_large = 0;
  Tree t(p);
  t.AddRoot("ref");
  int a = Add(t, 0, StepKind::kLarge, "A", Correct(1.0));
  std::mt19937_64 rng(1);
  EXPECT_EQ(t.ChooseStep(a, rng), StepKind::kSmall);
  t.AddChild(a, StepKind::kLarge, "L", "hl");  // large children do not count
  EXPECT_EQ(t.ChooseStep(a, rng), StepKind::kSmall);
  Add(t, a, StepKind::kSmall, "s1", Failed("mismatch"));
  EXPECT_EQ(t.ChooseStep(a, rng), StepKind::kSmall);
  t.AddChild(a, StepKind::kSmall, "s2", "hs2");  // pending ones do count
  for (int i = 0; i < 50; ++i) EXPECT_EQ(t.ChooseStep(a, rng), StepKind::kLarge);
}

TEST(ChooseStep, PLargeExtremes) {
  for (double pl : {0.0, 1.0}) {
    SearchParams p;
    p.p_large = pl;
    Tree t(p);
    t.AddRoot("ref");
    int a = Add(t, 0, StepKind::kLarge, "A", Correct(1.0));
    std::mt19937_64 rng(11);
    for (int i = 0; i < 200; ++i)
      EXPECT_EQ(t.ChooseStep(a, rng), pl == 1.0 ? StepKind::kLarge : StepKind::kSmall);
  }
}

TEST(ChooseStep, PLargeFrequency) {
  Tree t;  // p_large 0.2
  t.AddRoot("ref");
  int a = Add(t, 0, StepKind::kLarge, "A", Correct(1.0));
  std::mt19937_64 rng(2024);
  int large = 0, n = 20000;
  for (int i = 0; i < n; ++i) large += t.ChooseStep(a, rng) == StepKind::kLarge;
  EXPECT_GT(large, n * 0.18);
  EXPECT_LT(large, n * 0.22);
}

// ================================================================ recent path

TEST(RecentPath, StopsAtTheLatestLargeStep) {
  Tree t;
  t.AddRoot("ref");
  int l1 = t.AddChild(0, StepKind::kLarge, "L1", "");
  int s1 = t.AddChild(l1, StepKind::kSmall, "s1", "");
  int s2 = t.AddChild(s1, StepKind::kSmall, "s2", "");
  int s3 = t.AddChild(s2, StepKind::kSmall, "s3", "");
  EXPECT_EQ(t.RecentPath(s3), Ids({l1, s1, s2, s3}));
  EXPECT_EQ(t.RecentPath(l1), Ids({l1}));
  int l2 = t.AddChild(s3, StepKind::kLarge, "L2", "");
  int s4 = t.AddChild(l2, StepKind::kSmall, "s4", "");
  EXPECT_EQ(t.RecentPath(s4), Ids({l2, s4}));
  EXPECT_EQ(t.RecentPath(l2), Ids({l2}));
  EXPECT_TRUE(t.RecentPath(0).empty());
}

TEST(RecentPath, KeepsAtMostTheWindow) {
  Tree t;
  t.AddRoot("ref");
  int v = t.AddChild(0, StepKind::kLarge, "L", "");
  std::vector<int> chain{v};
  for (int i = 0; i < 6; ++i) chain.push_back(v = t.AddChild(v, StepKind::kSmall, "s", ""));
  EXPECT_EQ(t.RecentPath(v), std::vector<int>(chain.end() - 5, chain.end()));

  SearchParams p;
  p.path_window = 2;
  Tree narrow = Tree::FromJson([&] {
    json j = t.ToJson();
    j["params"] = p.ToJson();
    return j;
  }());
  EXPECT_EQ(narrow.RecentPath(v), std::vector<int>(chain.end() - 2, chain.end()));
}

TEST(RecentPath, NeverIncludesTheRoot) {
  Tree t;
  t.AddRoot("ref");
  int s1 = t.AddChild(0, StepKind::kSmall, "s1", "");  // e.g. a refinement-only baseline
  int s2 = t.AddChild(s1, StepKind::kSmall, "s2", "");
  EXPECT_EQ(t.RecentPath(s2), Ids({s1, s2}));
}

// ================================================================ diverse pool

// root
//  ├ A  large 2.0
//  │  ├ A1 small 3.0
//  │  │  └ A2 small 2.5
//  │  │     └ B large 1.5
//  │  │        └ B1 small (mismatch)
//  │  └ A3 small 2.8
//  ├ C  large 5.0
//  │  └ C1 small 6.0
//  ├ D  large 0.5
//  └ E  large (compile error)
//     └ E1 small 1.2
class PoolTree : public ::testing::Test {
 protected:
  void Build(int pool_size) {
    SearchParams p;
    p.pool_size = pool_size;
    t = Tree(p);
    t.AddRoot("ref", "h:ref");
    A = Add(t, 0, StepKind::kLarge, "A", Correct(2.0));
    A1 = Add(t, A, StepKind::kSmall, "A1", Correct(3.0));
    A2 = Add(t, A1, StepKind::kSmall, "A2", Correct(2.5));
    B = Add(t, A2, StepKind::kLarge, "B", Correct(1.5));
    B1 = Add(t, B, StepKind::kSmall, "B1", Failed("mismatch"));
    A3 = Add(t, A, StepKind::kSmall, "A3", Correct(2.8));
    C = Add(t, 0, StepKind::kLarge, "C", Correct(5.0));
    C1 = Add(t, C, StepKind::kSmall, "C1", Correct(6.0));
    D = Add(t, 0, StepKind::kLarge, "D", Correct(0.5));
    E = Add(t, 0, StepKind::kLarge, "E", Failed("compile_error"));
    E1 = Add(t, E, StepKind::kSmall, "E1", Correct(1.2));
  }
  Tree t;
  int A, A1, A2, B, B1, A3, C, C1, D, E, E1;
};

TEST_F(PoolTree, PathBranchesFirstThenOtherBranches) {
  Build(3);
  // Path branches of B1: B (best B) and A (best A1); then the best other
  // branch, C (C1), even though A3 is faster than B.
  EXPECT_EQ(t.DiversePool(B1), Ids({C1, A1, B}));
  Build(2);
  // Only two fit: both from the path, though C1 is the fastest overall.
  EXPECT_EQ(t.DiversePool(B1), Ids({A1, B}));
  EXPECT_EQ(t.DiversePool(C1), Ids({C1, A1}));
}

TEST_F(PoolTree, OneKernelPerBranchBeforeAnyRepeat) {
  Build(5);
  EXPECT_EQ(t.DiversePool(B1), Ids({C1, A1, B, E1, D}));
  EXPECT_EQ(t.DiversePool(0), Ids({C1, A1, B, E1, D}));
}

TEST_F(PoolTree, FillsWithTheNextBestAndNeverFailures) {
  Build(8);
  EXPECT_EQ(t.DiversePool(B1), Ids({C1, C, A1, A3, A2, B, E1, D}));
  Build(100);
  auto pool = t.DiversePool(B1);
  EXPECT_EQ(pool.size(), 9u);  // every correct candidate, none of E, B1 or the root
  for (int id : pool) {
    EXPECT_TRUE(t.node(id).outcome.correct);
    EXPECT_NE(id, 0);
  }
  for (size_t i = 1; i < pool.size(); ++i)
    EXPECT_GE(t.node(pool[i - 1]).outcome.speedup, t.node(pool[i]).outcome.speedup);
  Build(0);
  EXPECT_TRUE(t.DiversePool(B1).empty());
}

TEST_F(PoolTree, NeverTwoWithTheSameHash) {
  Build(100);
  // A second record of C1's kernel (same hash), faster by a lucky timing.
  int twin = t.AddChild(D, StepKind::kSmall, "C1 again", "h:C1");
  t.Record(twin, Correct(7.0));
  auto pool = t.DiversePool(B1);
  std::set<std::string> hashes;
  for (int id : pool) EXPECT_TRUE(hashes.insert(t.node(id).hash).second) << id;
  EXPECT_EQ(std::count(pool.begin(), pool.end(), twin) + std::count(pool.begin(), pool.end(), C1), 1);
  auto best = t.BestCorrect(100);
  EXPECT_EQ(std::count(best.begin(), best.end(), C1), 0);  // the twin (7.0) stands for the kernel
  EXPECT_EQ(best.front(), twin);
}

TEST_F(PoolTree, SmallStepsUnderTheRootFormTheRootsBranch) {
  Build(2);
  int r1 = Add(t, 0, StepKind::kSmall, "R1", Correct(9.0));
  int r2 = Add(t, r1, StepKind::kSmall, "R2", Correct(8.0));
  // From R2 the path branch is the root's: its best is R1; then C1.
  EXPECT_EQ(t.DiversePool(r2), Ids({r1, C1}));
}

// ================================================================ lookups

TEST_F(PoolTree, FindByHash) {
  Build(5);
  EXPECT_EQ(t.FindByHash("h:C1"), C1);
  EXPECT_EQ(t.FindByHash("h:B1"), B1);  // failures are found too: never judge twice
  EXPECT_FALSE(t.FindByHash("h:nope"));
  EXPECT_FALSE(t.FindByHash(""));
  EXPECT_FALSE(t.FindByHash("h:ref"));  // the root is not a candidate
  int again = t.AddChild(A, StepKind::kSmall, "A1", "h:A1");
  EXPECT_EQ(t.FindByHash("h:A1"), A1);  // the first one
  EXPECT_NE(again, A1);
}

TEST_F(PoolTree, BestCorrect) {
  Build(5);
  EXPECT_EQ(t.best(), C1);
  EXPECT_EQ(t.BestCorrect(3), Ids({C1, C, A1}));
  EXPECT_EQ(t.BestCorrect(100).size(), 9u);
  EXPECT_TRUE(t.BestCorrect(0).empty());
  int tie = Add(t, D, StepKind::kSmall, "D1", Correct(6.0));
  EXPECT_EQ(t.BestCorrect(2), Ids({C1, tie}));  // equal speedups: older first
}

TEST(Tree, NoBestWithoutACorrectCandidate) {
  Tree t;
  t.AddRoot("ref");
  EXPECT_EQ(t.best(), -1);
  Add(t, 0, StepKind::kLarge, "A", Failed("mismatch"));
  t.AddChild(0, StepKind::kLarge, "pending", "hp");
  EXPECT_EQ(t.best(), -1);
  EXPECT_TRUE(t.BestCorrect(5).empty());
}

// ================================================================ persistence

TEST_F(PoolTree, JsonRoundTrip) {
  SearchParams p;
  p.alpha = 0.7;
  p.reward.mapping = RewardMapping::kLogClipped;
  Build(4);
  json j = t.ToJson();
  j["params"] = p.ToJson();
  t = Tree::FromJson(j);
  ASSERT_EQ(t.params(), p);
  // Details worth keeping: notes, errors, flags, a pending node, odd text.
  t.SetNote(B1, "tuner edit #2 failed: `old` not found\n\"quoted\" ünïcödé");
  t.SetPlan(C1, json{{"cuts", {1, 3}}, {"v", 1}});
  int pending = t.AddChild(C1, StepKind::kSmall, std::string("pending\0src", 11), "h:pending", "guidance");
  Outcome o = Failed("rejected", "kernel never launched");
  o.flags = {"no_kernel_launch", "pytorch_only"};
  int rej = t.AddChild(C1, StepKind::kLarge, "R", "h:R");
  t.Record(rej, o);
  Outcome timed = Correct(1.5);
  timed.kernels = {{"_ax_gemm_kernel1", 0.75}, {"_ax_kernel0", 0.125}};
  int prof = t.AddChild(C1, StepKind::kSmall, "P", "h:P");
  t.Record(prof, timed);

  json saved = t.ToJson();
  Tree back = Tree::FromJson(json::parse(saved.dump()));
  EXPECT_EQ(back, t);
  EXPECT_EQ(back.ToJson(), saved);
  EXPECT_EQ(back.node(rej).outcome.flags, o.flags);
  EXPECT_EQ(back.node(prof).outcome.kernels, timed.kernels);
  EXPECT_EQ(back.node(C1).plan, json({{"cuts", {1, 3}}, {"v", 1}}));
  EXPECT_TRUE(back.node(B1).plan.is_null());
  EXPECT_FALSE(back.node(pending).judged);
  EXPECT_EQ(back.FindByHash("h:C1"), C1);  // the hash index is rebuilt
  EXPECT_EQ(back.DiversePool(B1), t.DiversePool(B1));
  EXPECT_EQ(back.BestCorrect(5), t.BestCorrect(5));
  // And it keeps growing the same way.
  EXPECT_EQ(back.AddChild(A, StepKind::kSmall, "x", "hx"), t.AddChild(A, StepKind::kSmall, "x", "hx"));
  EXPECT_EQ(back, t);
}

TEST(TreeJson, EmptyTreeRoundTrips) {
  Tree t;
  EXPECT_EQ(Tree::FromJson(t.ToJson()), t);
}

TEST(TreeJson, RejectsMalformedInput) {
  Tree t;
  t.AddRoot("ref");
  int a = Add(t, 0, StepKind::kLarge, "A", Correct(2.0));
  Add(t, a, StepKind::kSmall, "B", Correct(3.0));
  const json good = t.ToJson();
  Tree out;
  ASSERT_TRUE(Tree::TryFromJson(good, &out).ok());

  auto broken = [&](auto mutate) {
    json j = good;
    mutate(j);
    Tree o;
    Status st = Tree::TryFromJson(j, &o);
    return !st.ok() && !st.message().empty();
  };
  EXPECT_TRUE(broken([](json& j) { j = json::array(); }));
  EXPECT_TRUE(broken([](json& j) { j["format"] = "something else"; }));
  EXPECT_TRUE(broken([](json& j) { j["version"] = 2; }));
  EXPECT_TRUE(broken([](json& j) { j.erase("nodes"); }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][1]["id"] = 7; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][1]["parent"] = 2; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][1]["kind"] = "root"; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][0]["kind"] = "large"; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][1]["kind"] = "medium"; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][1]["children"] = json::array(); }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][1]["small_children"] = 0; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][2]["depth"] = 5; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][2]["visits"] = "many"; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][2]["outcome"]["flags"] = "x"; }));
  EXPECT_TRUE(broken([](json& j) { j["nodes"][2]["outcome"]["kernels"] = json::array({json::array({"k"})}); }));
  EXPECT_TRUE(broken([](json& j) { j["params"]["alpha"] = "half"; }));
  EXPECT_THROW(Tree::FromJson(json{{"format", "nope"}}), std::invalid_argument);
}

TEST(Rng, SaveAndRestore) {
  std::mt19937_64 rng(42);
  rng.discard(1000);
  std::string state = SaveRng(rng);
  std::vector<uint64_t> first;
  for (int i = 0; i < 5; ++i) first.push_back(rng());
  std::mt19937_64 other(7);
  ASSERT_TRUE(RestoreRng(state, &other));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(other(), first[i]);
  EXPECT_FALSE(RestoreRng("not a state", &other));
}

// ================================================================ a simulated search

// FNV-1a: a portable hash for the fake judge and the candidates' hashes.
uint64_t Fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::string Hex(uint64_t h) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[i] = d[h & 15];
  return s;
}

// The fake judge: a pure function of the source. A large step's kernel
// "L<n>" has a base speedup; each small edit ("+e<n>") multiplies it by a
// factor in [0.8, 1.4) or breaks it.
Outcome FakeJudge(const std::string& source) {
  uint64_t h = Fnv(source);
  switch (h % 10) {
    case 0: return Failed("compile_error", "NameError: tl.foo");
    case 1: return Failed("mismatch", "max abs error 3.2");
    case 2: return Failed("runtime_error", "illegal memory access");
    default: break;
  }
  double speedup = 0.3 + static_cast<double>((Fnv(source.substr(0, source.find('+'))) >> 8) % 200) / 100.0;
  for (size_t pos = source.find('+'); pos != std::string::npos; pos = source.find('+', pos + 1))
    speedup *= 0.8 + static_cast<double>(Fnv(source.substr(0, pos + 3)) % 60) / 100.0;
  return Correct(speedup);
}

// One run of the loop that the orchestrator will run: select, choose the
// step, propose (a fake proposer), detect duplicates, judge, backpropagate.
struct SimState {
  Tree tree;
  std::mt19937_64 rng;
  int counter = 0;
};

void SimStep(SimState& s) {
  Tree& t = s.tree;
  int sel = t.Select(s.rng).node;
  EXPECT_TRUE(t.node(sel).Expandable());
  StepKind kind = t.ChooseStep(sel, s.rng);
  std::string src;
  int n = s.counter++;
  if (kind == StepKind::kLarge) {
    auto pool = t.DiversePool(sel);
    EXPECT_LE(pool.size(), static_cast<size_t>(t.params().pool_size));
    src = "L" + std::to_string(n % 37);  // repeats now and then: duplicates
  } else {
    auto path = t.RecentPath(sel);
    EXPECT_FALSE(path.empty());
    EXPECT_EQ(path.back(), sel);
    src = t.node(sel).source + "+e" + std::to_string(n % 5);
  }
  std::string hash = Hex(Fnv(src));
  int id = t.AddChild(sel, kind, src, hash);
  Outcome o = t.FindByHash(hash) != id ? Failed(kStatusDuplicate) : FakeJudge(src);
  t.Record(id, o);
}

// visits, total and max of every node agree with its own reward and its
// children's.
void CheckInvariants(const Tree& t) {
  for (const Node& n : t.nodes()) {
    int visits = (n.kind != StepKind::kRoot && n.judged) ? 1 : 0;
    double total = visits ? n.reward : 0;
    double mx = visits ? n.reward : -1e300;
    for (int c : n.children) {
      const Node& ch = t.node(c);
      visits += ch.visits;
      total += ch.total_reward;
      if (ch.visits) mx = std::max(mx, ch.max_reward);
    }
    EXPECT_EQ(n.visits, visits) << n.id;
    EXPECT_NEAR(n.total_reward, total, 1e-9) << n.id;
    if (visits) {
      EXPECT_DOUBLE_EQ(n.max_reward, mx) << n.id;
    }
  }
}

SimState NewSim(uint64_t seed) {
  SimState s{Tree(), std::mt19937_64(seed)};
  s.tree.AddRoot("class Model(nn.Module): ...", "ref");
  return s;
}

TEST(Simulation, BestRewardNeverDecreasesAndTheSearchImproves) {
  SimState s = NewSim(7);
  double best_reward = -1, best_speedup = 0, first_speedup = 0;
  const int steps = 300;
  for (int i = 0; i < steps; ++i) {
    SimStep(s);
    const Node& root = s.tree.node(0);
    EXPECT_GE(root.max_reward, best_reward);
    best_reward = root.max_reward;
    int b = s.tree.best();
    if (b >= 0) {
      double sp = s.tree.node(b).outcome.speedup;
      EXPECT_GE(sp, best_speedup);
      if (best_speedup == 0) first_speedup = sp;
      best_speedup = sp;
      EXPECT_DOUBLE_EQ(best_reward, Reward(s.tree.node(b).outcome, s.tree.params().reward));
    }
  }
  const Tree& t = s.tree;
  EXPECT_EQ(t.node(0).visits, steps);
  EXPECT_EQ(t.size(), static_cast<size_t>(steps + 1));
  CheckInvariants(t);
  ASSERT_GE(t.best(), 0);
  EXPECT_GT(best_speedup, first_speedup);

  int large = 0, small = 0, dups = 0, failed = 0, max_depth = 0;
  for (const Node& n : t.nodes()) {
    large += n.kind == StepKind::kLarge;
    small += n.kind == StepKind::kSmall;
    dups += n.outcome.status == kStatusDuplicate;
    failed += n.judged && !n.outcome.correct;
    max_depth = std::max(max_depth, n.depth);
  }
  EXPECT_GT(large, 10);
  EXPECT_GT(small, 10);
  EXPECT_GT(dups, 0);
  EXPECT_GT(failed, 0);
  EXPECT_GE(max_depth, 3);
  // No node ever got more small-step children than the limit allows
  // (ChooseStep is asked before each).
  for (const Node& n : t.nodes()) EXPECT_LE(n.small_children, t.params().small_step_limit);
}

TEST(Simulation, SameSeedSameTree) {
  SimState a = NewSim(99), b = NewSim(99), c = NewSim(100);
  for (int i = 0; i < 150; ++i) {
    SimStep(a);
    SimStep(b);
    SimStep(c);
  }
  EXPECT_EQ(a.tree.ToJson(), b.tree.ToJson());
  EXPECT_NE(a.tree.ToJson(), c.tree.ToJson());
}

TEST(Simulation, ResumedRunEndsWithTheSameTree) {
  SimState straight = NewSim(5);
  for (int i = 0; i < 200; ++i) SimStep(straight);

  SimState first = NewSim(5);
  for (int i = 0; i < 80; ++i) SimStep(first);
  // "Killed" here: persist the tree, the rng and the counter, then resume.
  std::string saved_tree = first.tree.ToJson().dump();
  std::string saved_rng = SaveRng(first.rng);
  SimState resumed{Tree::FromJson(json::parse(saved_tree)), std::mt19937_64()};
  ASSERT_TRUE(RestoreRng(saved_rng, &resumed.rng));
  resumed.counter = first.counter;
  for (int i = 80; i < 200; ++i) SimStep(resumed);

  EXPECT_EQ(resumed.tree, straight.tree);
  EXPECT_EQ(resumed.tree.ToJson(), straight.tree.ToJson());
}

// ================================================================ warm start

TEST(WarmStart, NodesAreLargeRootChildrenPersistedAndPooled) {
  Tree t;
  t.AddRoot("ref");
  int w = Add(t, 0, StepKind::kLarge, "warm", Correct(2.0));
  t.SetWarmStart(w);
  int a = Add(t, 0, StepKind::kLarge, "a", Correct(1.0));
  int s = Add(t, w, StepKind::kSmall, "w-edit", Correct(3.0));
  EXPECT_THROW(t.SetWarmStart(s), std::logic_error) << "a small step";
  EXPECT_THROW(t.SetWarmStart(0), std::logic_error) << "the root";
  int deep = Add(t, a, StepKind::kLarge, "deep", Correct(1.1));
  EXPECT_THROW(t.SetWarmStart(deep), std::logic_error) << "not under the root";
  // Correct warm-start kernels join the pool of later large steps.
  std::vector<int> pool = t.DiversePool(0);
  EXPECT_NE(std::find(pool.begin(), pool.end(), w), pool.end());
  // Persisted; a tree without the key reads as not warm.
  json j = t.ToJson();
  EXPECT_EQ(j["nodes"][w]["warm_start"], true);
  EXPECT_FALSE(j["nodes"][a].contains("warm_start"));
  Tree back = Tree::FromJson(j);
  EXPECT_EQ(back, t);
  EXPECT_TRUE(back.node(w).warm_start);
  EXPECT_FALSE(back.node(s).warm_start);
  j["nodes"][w].erase("warm_start");
  EXPECT_FALSE(Tree::FromJson(j) == t) << "operator== covers the mark";
  json bad = t.ToJson();
  bad["nodes"][s]["warm_start"] = true;
  Tree out;
  EXPECT_FALSE(Tree::TryFromJson(bad, &out).ok());
}

TEST(WarmStart, SelectDescendsIntoAGoodWarmStartNode) {
  Tree t;
  t.AddRoot("ref");
  int w = Add(t, 0, StepKind::kLarge, "warm", Correct(8.0));
  t.SetWarmStart(w);
  Add(t, 0, StepKind::kLarge, "bad", Failed("compile_error"));
  std::mt19937_64 rng(1);
  int hits = 0;
  for (int i = 0; i < 20; ++i) hits += t.Select(rng).node == w;
  EXPECT_GT(hits, 0) << "small steps must be able to refine the warm-start kernel";
}

}  // namespace
}  // namespace ax::search
