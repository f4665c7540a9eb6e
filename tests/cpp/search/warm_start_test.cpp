// Tests of the warm start (TaskSearch::SetWarmStart, SearchConfig::
// warm_start_steps): a second proposer takes the first steps as large steps
// from the root; its nodes are marked, join the pool that later large steps
// see, and small steps may refine them; a declined or exhausted warm start
// leaves its steps to the main proposer; the summary says where the winner
// came from; a resumed run replays to the same tree. Also the typed stop codes
// of a provider that rejects the run. Fakes: search_fakes.h.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/util.h"
#include "search/proposer.h"
#include "search/run_store.h"
#include "search/search.h"
#include "search/tree.h"
#include "search_fakes.h"

namespace ax::search {
namespace {

using fakes::FakeJudge;
using fakes::FakeLlm;
using fakes::FakeProposer;
using fakes::Kernel;
using fakes::Source;

class WarmStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "axwarm");
    ASSERT_FALSE(dir_.empty());
    Status s = Prompts::Load(std::string(ADAEXPLORE_SOURCE_DIR) + "/prompts", &prompts_);
    ASSERT_TRUE(s.ok()) << s.message();
    task_ = fakes::MakeTask();
    warm_.origin = "builtin";
  }
  void TearDown() override { RemoveTree(dir_); }

  static SearchConfig Config(const std::string& method, int steps, int warm_steps) {
    SearchConfig c;
    c.method = method;
    c.steps = steps;
    c.seed = 5;
    c.warm_start_steps = warm_steps;
    return c;
  }

  struct Ran {
    Status status;
    TaskResult result;
    Tree tree;
  };
  Ran Run(Proposer* main, Proposer* warm, SearchConfig cfg, RunStore* store = nullptr) {
    Ran r;
    TaskSearch search(task_, &judge_, JudgeOptions{}, main, store, std::move(cfg), nullptr, nullptr);
    search.SetWarmStart(warm);
    r.status = search.Run(dir_ + "/out", &r.result);
    r.tree = search.tree();
    return r;
  }

  // A main proposer whose kernels are all correct at `speedup`, distinct.
  static void AlwaysCorrect(FakeProposer* p, const std::string& speedup) {
    p->fallback = [speedup](const StepContext&, int call) {
      return Source(Kernel("main" + std::to_string(call), "# fake: speedup=" + speedup));
    };
  }

  std::string dir_;
  Prompts prompts_;
  TaskRef task_;
  FakeJudge judge_;
  FakeProposer warm_;
};

TEST_F(WarmStartTest, WarmStartNodesAreLargeRootChildrenMarkedWarm) {
  const std::string good = Kernel("warm-good", "# fake: speedup=1.5");
  warm_.script = {Source(good), Source(Kernel("warm-bad", "# fake: compile_error"))};
  FakeProposer main;
  AlwaysCorrect(&main, "1.1");
  Ran r = Run(&main, &warm_, Config("mcts", 6, 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.tree.size(), 7u);
  for (int id : {1, 2}) {
    const Node& n = r.tree.node(id);
    EXPECT_TRUE(n.warm_start) << id;
    EXPECT_EQ(n.parent, 0);
    EXPECT_EQ(n.kind, StepKind::kLarge);
  }
  for (int id = 3; id < 7; ++id) EXPECT_FALSE(r.tree.node(id).warm_start) << id;
  ASSERT_EQ(warm_.contexts.size(), 2u);
  for (const auto& c : warm_.contexts) EXPECT_TRUE(c.large);
  EXPECT_EQ(main.contexts.size(), 4u) << "the warm-start steps count against --steps";
  EXPECT_EQ(r.result.steps_done, 6);
  EXPECT_EQ(r.result.warm_start_steps, 2);
  // The main proposer's first step sees the correct warm-start kernel: in the
  // pool of a large step, or as the parent of a small one.
  const StepContext& first = main.contexts[0];
  bool seen = first.prompt.parent.source == good;
  for (const auto& k : first.prompt.pool) seen = seen || k.source == good;
  EXPECT_TRUE(seen);
  // Persisted with the tree.
  Tree back;
  ASSERT_TRUE(Tree::TryFromJson(r.tree.ToJson(), &back).ok());
  EXPECT_EQ(back, r.tree);
  EXPECT_EQ(r.result.ToJson()["warm_start_steps"], 2);
}

TEST_F(WarmStartTest, ADeclinedWarmStartSpendsNoStep) {
  Proposal decline;
  decline.note = "cannot trace: data-dependent control flow";
  decline.stop = Status::Error(decline.note);
  warm_.script = {decline};
  FakeProposer main;
  AlwaysCorrect(&main, "1.2");
  Ran r = Run(&main, &warm_, Config("mcts", 3, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.status, "found") << "the run goes on as without a warm start";
  EXPECT_TRUE(r.result.stop.ok());
  EXPECT_EQ(r.result.warm_start_steps, 0);
  EXPECT_EQ(main.contexts.size(), 3u) << "every step went to the main proposer";
  EXPECT_EQ(r.result.steps_done, 3);
  EXPECT_EQ(warm_.contexts.size(), 1u);
  EXPECT_EQ(r.result.best_origin, "llm");
}

TEST_F(WarmStartTest, AnExhaustedWarmStartLeavesTheRestToTheMainProposer) {
  warm_.script = {Source(Kernel("only-plan", "# fake: speedup=1.3")), Proposal{}};
  FakeProposer main;
  AlwaysCorrect(&main, "1.1");
  Ran r = Run(&main, &warm_, Config("mcts", 6, 3));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.warm_start_steps, 1);
  EXPECT_EQ(warm_.contexts.size(), 2u) << "the warm start ends at its first empty proposal";
  EXPECT_EQ(main.contexts.size(), 5u);
  EXPECT_EQ(r.tree.size(), 7u) << "the empty proposal adds no node";
}

TEST_F(WarmStartTest, TheWarmBudgetIsClampedToTheSteps) {
  warm_.fallback = [](const StepContext&, int call) {
    return Source(Kernel("plan" + std::to_string(call), "# fake: speedup=1.4"));
  };
  FakeProposer main;
  AlwaysCorrect(&main, "1.1");
  Ran r = Run(&main, &warm_, Config("mcts", 4, 9));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.warm_start_steps, 4);
  EXPECT_EQ(r.result.steps_done, 4);
  EXPECT_TRUE(main.contexts.empty());
  EXPECT_EQ(r.result.best_origin, "builtin");
  EXPECT_FALSE(r.result.first_correct) << "pass@1 is the main proposer's; it made no proposal";
}

TEST_F(WarmStartTest, TheBestOriginIsTheWarmStartWhenTheMainProposerOnlyFails) {
  warm_.script = {Source(Kernel("warm", "# fake: speedup=1.5"))};
  FakeProposer main;
  main.fallback = [](const StepContext&, int call) {
    return Source(Kernel("bad" + std::to_string(call), "# fake: mismatch"));
  };
  Ran r = Run(&main, &warm_, Config("mcts", 5, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.best_node, 1);
  EXPECT_EQ(r.result.best_origin, "builtin");
  EXPECT_FALSE(r.result.best_refines_warm_start);
  EXPECT_EQ(r.result.ToJson()["best_origin"], "builtin");
}

TEST_F(WarmStartTest, TheBestOriginIsTheLlmWhenItWritesAFasterKernel) {
  warm_.script = {Source(Kernel("warm", "# fake: speedup=1.5"))};
  FakeProposer main;
  main.fallback = [](const StepContext& ctx, int call) {
    if (ctx.large) return Source(Kernel("fast" + std::to_string(call), "# fake: speedup=3.0"));
    return Source(Kernel("bad" + std::to_string(call), "# fake: compile_error"));
  };
  Ran r = Run(&main, &warm_, Config("bon", 4, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_GT(r.result.best_node, 1);
  EXPECT_EQ(r.result.best_origin, "llm");
  EXPECT_FALSE(r.result.best_refines_warm_start) << "a new kernel, not an edit of the warm-start one";
}

TEST_F(WarmStartTest, SmallStepsRefineTheWarmStartKernel) {
  const std::string warm_kernel = Kernel("warm", "# fake: speedup=1.5");
  warm_.script = {Source(warm_kernel), Source(Kernel("warm-slow", "# fake: speedup=0.5"))};
  FakeProposer main;
  main.fallback = [](const StepContext& ctx, int call) {
    if (ctx.large) return Source(Kernel("bad" + std::to_string(call), "# fake: compile_error"));
    // An edit of the parent that makes it faster.
    return Source(ctx.prompt.parent.source + "# fake: speedup=" + std::to_string(2.0 + call) + "\n");
  };
  // Iterative refinement continues from the best warm-start kernel.
  Ran r = Run(&main, &warm_, Config("ir", 4, 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_FALSE(main.contexts.empty());
  EXPECT_FALSE(main.contexts[0].large);
  EXPECT_EQ(main.contexts[0].prompt.parent.source, warm_kernel);
  const Node& best = r.tree.node(r.result.best_node);
  EXPECT_EQ(best.kind, StepKind::kSmall);
  EXPECT_EQ(r.result.best_origin, "llm");
  EXPECT_TRUE(r.result.best_refines_warm_start);
  auto j = r.result.ToJson();
  EXPECT_EQ(j["best_refines_warm_start"], true);
  TaskResult back;
  ASSERT_TRUE(TaskResult::FromStored(j, &back));
  EXPECT_EQ(back.warm_start_steps, 2);
  EXPECT_EQ(back.best_origin, "llm");
  EXPECT_TRUE(back.best_refines_warm_start);
}

TEST_F(WarmStartTest, MctsSelectsWarmStartNodesForSmallSteps) {
  warm_.script = {Source(Kernel("warm", "# fake: speedup=4.0"))};
  FakeProposer main;
  main.fallback = [](const StepContext& ctx, int call) {
    if (ctx.large) return Source(Kernel("bad" + std::to_string(call), "# fake: compile_error"));
    return Source(ctx.prompt.parent.source + "# edit " + std::to_string(call) + "\n");
  };
  SearchConfig cfg = Config("mcts", 12, 1);
  cfg.params.p_large = 0;  // a node selected takes small steps until its limit
  Ran r = Run(&main, &warm_, cfg);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  int refined = 0;
  for (const Node& n : r.tree.nodes()) refined += n.parent == 1 && n.kind == StepKind::kSmall;
  EXPECT_GT(refined, 0) << "the warm-start kernel was never refined";
}

// A resumed run (the same store, a fresh warm-start proposer: the builtin is
// deterministic) replays to the same tree without asking or judging again.
TEST_F(WarmStartTest, AResumedRunReplaysToTheSameTree) {
  std::unique_ptr<RunStore> store;
  ASSERT_TRUE(RunStore::Open(dir_ + "/run.sqlite", &store).ok());
  auto script = [](FakeProposer* w) {
    w->origin = "builtin";
    w->script = {Source(Kernel("w1", "# fake: speedup=1.5")), Source(Kernel("w2", "# fake: mismatch"))};
  };
  SearchConfig cfg = Config("mcts", 9, 2);
  FakeLlm live;
  LlmCaller caller1(&live, store.get(), task_.name, 4096);
  LlmProposer llm1(&prompts_, &caller1);
  FakeProposer w1;
  script(&w1);
  Ran first = Run(&llm1, &w1, cfg, store.get());
  ASSERT_TRUE(first.status.ok()) << first.status.message();
  ASSERT_EQ(first.result.warm_start_steps, 2);

  judge_.Reset();
  FakeLlm dead;
  dead.FailEverything(llm::ErrorKind::kAuth, "resume asked the LLM again");
  LlmCaller caller2(&dead, store.get(), task_.name, 4096);
  LlmProposer llm2(&prompts_, &caller2);
  FakeProposer w2;
  script(&w2);
  Ran second = Run(&llm2, &w2, cfg, store.get());
  ASSERT_TRUE(second.status.ok()) << second.status.message();
  EXPECT_EQ(second.tree.ToJson(), first.tree.ToJson());
  EXPECT_EQ(dead.calls(), 0);
  EXPECT_EQ(judge_.search_calls(), 0) << "every verdict comes from the store";
  EXPECT_EQ(second.result.best_origin, first.result.best_origin);
}

// ================================================================ stop codes

struct StopCase {
  llm::ErrorKind kind;
  StatusCode code;
  bool rejected;
};

class StopCodeTest : public WarmStartTest, public ::testing::WithParamInterface<StopCase> {};

TEST_P(StopCodeTest, AFatalLlmErrorStopsTheRunWithATypedCode) {
  FakeLlm llm;
  llm.FailEverything(GetParam().kind, "HTTP error");
  LlmCaller caller(&llm, nullptr, task_.name, 4096);
  LlmProposer proposer(&prompts_, &caller);
  warm_.script = {Source(Kernel("warm", "# fake: speedup=1.5"))};
  Ran r = Run(&proposer, &warm_, Config("mcts", 6, 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.stop.code(), GetParam().code);
  EXPECT_EQ(RejectedByProvider(r.result.stop), GetParam().rejected);
  EXPECT_EQ(llm.calls(), 1) << "no call after the first fatal one";
  EXPECT_EQ(r.result.steps_done, 1) << "the warm-start step";
  EXPECT_EQ(r.result.best_origin, "builtin") << "the warm-start result is kept";
  EXPECT_EQ(r.result.ToJson()["stop_code"], StatusCodeName(GetParam().code));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, StopCodeTest,
    ::testing::Values(StopCase{llm::ErrorKind::kAuth, StatusCode::kUnauthenticated, true},
                      StopCase{llm::ErrorKind::kNotFound, StatusCode::kNotFound, true},
                      StopCase{llm::ErrorKind::kQuota, StatusCode::kResourceExhausted, true},
                      StopCase{llm::ErrorKind::kBudget, StatusCode::kCancelled, false},
                      StopCase{llm::ErrorKind::kConfig, StatusCode::kInvalidInput, false}));

}  // namespace
}  // namespace ax::search
