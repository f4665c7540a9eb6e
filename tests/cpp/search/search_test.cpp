// End-to-end tests of TaskSearch with a fake judge (verdicts from markers in
// the candidate's source, see search_fakes.h) and either a scripted proposer
// or the real LlmProposer over a fake LLM client and a real run store:
// best.py, duplicates, failed edits, the tuner's retry, the three methods,
// budgets and stops, and resuming a run from its store.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/util.h"
#include "search/proposer.h"
#include "search/run_store.h"
#include "search/search.h"
#include "search_fakes.h"

namespace ax::search {
namespace {

using fakes::FakeJudge;
using fakes::FakeLlm;
using fakes::FakeProposer;
using fakes::Fenced;
using fakes::Kernel;
using fakes::Source;
using nlohmann::json;

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class SearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "axsearch");
    ASSERT_FALSE(dir_.empty());
    out_ = dir_ + "/out";
    Status s = Prompts::Load(std::string(ADAEXPLORE_SOURCE_DIR) + "/prompts", &prompts_);
    ASSERT_TRUE(s.ok()) << s.message();
    task_ = fakes::MakeTask();
  }
  void TearDown() override { RemoveTree(dir_); }

  std::unique_ptr<RunStore> OpenStore(const std::string& name = "run.sqlite") {
    std::unique_ptr<RunStore> s;
    Status st = RunStore::Open(dir_ + "/" + name, &s);
    EXPECT_TRUE(st.ok()) << st.message();
    return s;
  }

  static SearchConfig Config(const std::string& method, int steps, unsigned long long seed = 1) {
    SearchConfig c;
    c.method = method;
    c.steps = steps;
    c.seed = seed;
    return c;
  }

  struct Ran {
    Status status;
    TaskResult result;
    Tree tree;
    std::vector<std::string> progress;
    std::vector<Progress> events;
  };

  Ran RunSearch(Proposer* proposer, SearchConfig cfg, RunStore* store = nullptr,
                std::function<Status()> budget = {}, const std::string& out = "") {
    Ran r;
    JudgeOptions jo;
    TaskSearch search(task_, &judge_, jo, proposer, store, std::move(cfg),
                      [&r](const Progress& p) {
                        r.progress.push_back(p.line);
                        r.events.push_back(p);
                      },
                      std::move(budget));
    r.status = search.Run(out.empty() ? out_ : out, &r.result);
    r.tree = search.tree();
    return r;
  }

  std::optional<std::string> BestPy() const { return ReadFile(out_ + "/best.py"); }

  int NodeWithSource(const Tree& t, const std::string& src) const {
    for (const Node& n : t.nodes())
      if (n.kind != StepKind::kRoot && n.source == src) return n.id;
    return -1;
  }

  std::string dir_, out_;
  Prompts prompts_;
  TaskRef task_;
  FakeJudge judge_;
};

// ================================================================ scripted proposer

TEST_F(SearchTest, WritesTheFastestCorrectCandidateToBestPy) {
  const std::string k1 = Kernel("k1", "# fake: compile_error"), k2 = Kernel("k2", "# fake: mismatch"),
                    k3 = Kernel("k3", "# fake: speedup=1.5"), k4 = Kernel("k4", "# fake: speedup=3.0"),
                    k5 = Kernel("k5", "# fake: runtime_error");
  FakeProposer p;
  p.script = {Source(k1), Source(k2), Source(k3), Source(k4), Source(k5)};
  Ran r = RunSearch(&p, Config("mcts", 5));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.status, "found");
  EXPECT_EQ(r.result.steps_done, 5);
  EXPECT_EQ(r.tree.size(), 6u);
  const int best = NodeWithSource(r.tree, k4);
  ASSERT_GT(best, 0);
  EXPECT_EQ(r.result.best_node, best);
  EXPECT_DOUBLE_EQ(r.result.best.speedup.at("eager"), 3.0);
  EXPECT_EQ(r.result.judged, 5);
  EXPECT_EQ(r.result.judge_reused, 0);
  EXPECT_EQ(judge_.search_calls(), 5);
  EXPECT_EQ(judge_.retime_calls(), 2) << "both correct candidates are re-timed";

  auto py = BestPy();
  ASSERT_TRUE(py.has_value());
  const std::string header = "# adaexplore: best kernel for 19_ReLU (node " + std::to_string(best) +
                             ", 3.000x vs eager on FakeGPU, tolerance strict)\n";
  EXPECT_EQ(*py, header + k4);

  EXPECT_EQ(r.tree.node(NodeWithSource(r.tree, k1)).outcome.status, "compile_error");
  EXPECT_EQ(r.tree.node(NodeWithSource(r.tree, k2)).outcome.status, "mismatch");
  EXPECT_EQ(r.tree.node(NodeWithSource(r.tree, k5)).outcome.status, "runtime_error");
  EXPECT_TRUE(r.tree.node(NodeWithSource(r.tree, k3)).outcome.correct);
  ASSERT_EQ(r.progress.size(), 5u);
  EXPECT_EQ(r.progress[0].rfind("step 1/5 large from node 0: compile_error", 0), 0u) << r.progress[0];
  EXPECT_TRUE(Has(r.progress[4], "| best 3.000x")) << r.progress[4];
  // The events carry the figures a progress bar needs, not only the line.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.events[i].step, i + 1);
    EXPECT_EQ(r.events[i].steps, 5);
    EXPECT_EQ(r.events[i].task, r.result.task);
  }
  EXPECT_FALSE(r.events[0].best_speedup.has_value());  // the first candidate did not compile
  ASSERT_TRUE(r.events[4].best_speedup.has_value());
  EXPECT_DOUBLE_EQ(*r.events[4].best_speedup, 3.0);
}

TEST_F(SearchTest, TheFinalReTimingDecidesTheWinner) {
  // k1 looked faster during the search, but not when re-timed.
  const std::string k1 = Kernel("lucky", "# fake: speedup=3.0\n# fake: retime_speedup=1.2");
  const std::string k2 = Kernel("steady", "# fake: speedup=2.0");
  FakeProposer p;
  p.script = {Source(k1), Source(k2)};
  Ran r = RunSearch(&p, Config("bon", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.best_node, NodeWithSource(r.tree, k2));
  EXPECT_DOUBLE_EQ(r.result.best.speedup.at("eager"), 2.0);
  EXPECT_TRUE(Has(*BestPy(), "# kernel steady"));
}

TEST_F(SearchTest, ACandidateThatFailsTheReTimingIsDroppedWithItsReason) {
  // k1 passed during the search but not on the final re-timing's fresh inputs.
  const std::string k1 = Kernel("flaky", "# fake: speedup=3.0\n# fake: retime_mismatch");
  const std::string k2 = Kernel("steady", "# fake: speedup=2.0");
  FakeProposer p;
  p.script = {Source(k1), Source(k2)};
  Ran r = RunSearch(&p, Config("bon", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.result.best_node, NodeWithSource(r.tree, k2));
  ASSERT_EQ(r.result.retime_failures.size(), 1u);
  EXPECT_EQ(r.result.retime_failures[0]["node"].get<int>(), NodeWithSource(r.tree, k1));
  EXPECT_TRUE(Has(r.result.retime_failures[0]["reason"].get<std::string>(), "mismatch: output 0"));
  EXPECT_TRUE(Has(r.progress.back(), "re-timing node " + std::to_string(NodeWithSource(r.tree, k1)) + " failed: mismatch"))
      << r.progress.back();
  // The reasons are part of the stored result.
  TaskResult back;
  ASSERT_TRUE(TaskResult::FromStored(r.result.ToJson(), &back));
  EXPECT_EQ(back.retime_failures, r.result.retime_failures);
}

TEST_F(SearchTest, ACandidateWhoseReferenceFailedOnceIsJudgedAgain) {
  const std::string k1 = Kernel("refkill-once", "# fake: speedup=2.0\n# fake: refkill=1");
  FakeProposer p;
  p.script = {Source(k1)};
  Ran r = RunSearch(&p, Config("bon", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(judge_.search_calls(), 2) << "judged again after the reference failure";
  EXPECT_EQ(r.result.status, "found");
  // Twice in a row: recorded as it came, flagged as the judge's failure.
  const std::string k2 = Kernel("refkill", "# fake: speedup=2.0\n# fake: refkill=2");
  FakeProposer p2;
  p2.script = {Source(k2)};
  Ran r2 = RunSearch(&p2, Config("bon", 1));
  ASSERT_TRUE(r2.status.ok()) << r2.status.message();
  EXPECT_EQ(r2.result.status, "none");
  const int node = NodeWithSource(r2.tree, k2);
  ASSERT_GE(node, 0);
  EXPECT_EQ(r2.tree.node(node).outcome.status, "runtime_error");
  const auto& flags = r2.tree.node(node).outcome.flags;
  EXPECT_NE(std::find(flags.begin(), flags.end(), "reference_failed"), flags.end());
}

TEST_F(SearchTest, AReTimingThatTimesOutOnceIsRetried) {
  const std::string k1 = Kernel("slow-once", "# fake: speedup=3.0\n# fake: retime_timeout=1");
  FakeProposer p;
  p.script = {Source(k1)};
  Ran r = RunSearch(&p, Config("bon", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(judge_.retime_calls(), 2);
  EXPECT_EQ(r.result.status, "found");
  EXPECT_TRUE(r.result.retime_failures.empty());
  // Twice in a row: dropped, with the reason.
  const std::string k2 = Kernel("slow", "# fake: speedup=3.0\n# fake: retime_timeout=2");
  FakeProposer p2;
  p2.script = {Source(k2)};
  Ran r2 = RunSearch(&p2, Config("bon", 1));
  ASSERT_TRUE(r2.status.ok()) << r2.status.message();
  EXPECT_EQ(r2.result.status, "none");
  ASSERT_EQ(r2.result.retime_failures.size(), 1u);
  EXPECT_TRUE(Has(r2.result.retime_failures[0]["reason"].get<std::string>(), "timeout: run timed out"));
  // The trusted reference dying is not the candidate's doing either.
  const std::string k3 = Kernel("refkill-once", "# fake: speedup=3.0\n# fake: retime_refkill=1");
  FakeProposer p3;
  p3.script = {Source(k3)};
  Ran r3 = RunSearch(&p3, Config("bon", 1));
  ASSERT_TRUE(r3.status.ok()) << r3.status.message();
  EXPECT_EQ(r3.result.status, "found");
  EXPECT_TRUE(r3.result.retime_failures.empty());
}

TEST_F(SearchTest, RetimeTopLimitsTheShortlist) {
  FakeProposer p;
  for (int i = 0; i < 5; ++i) p.script.push_back(Source(Kernel("k" + std::to_string(i), "# fake: speedup=" + std::to_string(1 + i))));
  SearchConfig cfg = Config("bon", 5);
  cfg.retime_top = 2;
  Ran r = RunSearch(&p, cfg);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(judge_.retime_calls(), 2);
  EXPECT_DOUBLE_EQ(r.result.best.speedup.at("eager"), 5.0);
}

TEST_F(SearchTest, NoCorrectCandidateLeavesNoBestPy) {
  ASSERT_TRUE(std::filesystem::create_directories(out_));
  ASSERT_TRUE(WriteFile(out_ + "/best.py", "stale from an earlier run\n"));
  FakeProposer p;
  p.script = {Source(Kernel("a", "# fake: compile_error")), Source(Kernel("b", "# fake: mismatch"))};
  Ran r = RunSearch(&p, Config("mcts", 2));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.result.status, "none");
  EXPECT_EQ(r.result.best_node, -1);
  EXPECT_FALSE(BestPy().has_value()) << "a stale best.py must not survive";
  EXPECT_EQ(judge_.retime_calls(), 0);
}

TEST_F(SearchTest, DuplicatesAreNeverJudgedTwice) {
  const std::string a = Kernel("a", "# fake: speedup=2.0"), b = Kernel("b", "# fake: compile_error"),
                    c = Kernel("c", "# fake: speedup=1.0");
  FakeProposer p;
  p.script = {Source(a), Source(b), Source(a), Source(b), Source(a), Source(c)};
  Ran r = RunSearch(&p, Config("mcts", 6));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(judge_.search_calls(), 3);
  EXPECT_EQ(judge_.judged(), (std::vector<std::string>{a, b, c}));
  EXPECT_EQ(r.result.judged, 3);
  ASSERT_EQ(r.tree.size(), 7u);
  const int ia = NodeWithSource(r.tree, a), ib = NodeWithSource(r.tree, b);
  int dups = 0;
  for (const Node& n : r.tree.nodes()) {
    if (n.outcome.status != kStatusDuplicate) continue;
    ++dups;
    EXPECT_FALSE(n.Expandable());
    EXPECT_EQ(n.reward, 0.0);
    if (n.source == a) {
      EXPECT_EQ(n.outcome.error, "identical to node " + std::to_string(ia) + " (correct, 2.000x vs eager PyTorch (0.5000 ms))");
    } else {
      EXPECT_EQ(n.source, b);
      EXPECT_EQ(n.outcome.error, "identical to node " + std::to_string(ib) + " (compile_error: fake compile_error: line 3)");
    }
  }
  EXPECT_EQ(dups, 3);
}

TEST_F(SearchTest, ACandidateIdenticalToTheReferenceIsJudged) {
  // The root is the task, not a candidate: a proposal equal to it is judged.
  FakeProposer p;
  p.script = {Source(task_.source)};
  Ran r = RunSearch(&p, Config("mcts", 1));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(judge_.search_calls(), 1);
  EXPECT_EQ(r.tree.node(1).outcome.status, "ok");
}

TEST_F(SearchTest, AStepWithoutACandidateIsRecordedWithItsNote) {
  FakeProposer p;
  Proposal none;
  none.note = "the reply held no code";
  p.script = {none, Source(Kernel("a", "# fake: speedup=1.2"))};
  Ran r = RunSearch(&p, Config("mcts", 2));
  ASSERT_TRUE(r.status.ok());
  const Node& n = r.tree.node(1);
  EXPECT_EQ(n.outcome.status, kStatusNoCandidate);
  EXPECT_EQ(n.note, "the reply held no code");
  EXPECT_EQ(n.outcome.error, "the reply held no code");
  EXPECT_TRUE(n.source.empty());
  EXPECT_FALSE(n.Expandable());
  EXPECT_EQ(r.tree.node(2).parent, 0) << "nothing to grow from a step without a candidate";
  EXPECT_EQ(judge_.search_calls(), 1);
}

// A proposer answering every step with a new kernel; the verdict cycles
// through failures and speedups so that the tree has every kind of node.
Proposal Varied(const StepContext& ctx, int call) {
  static const char* kMarkers[] = {"# fake: speedup=1.3", "# fake: compile_error", "# fake: speedup=2.1",
                                   "# fake: mismatch",     "# fake: speedup=0.7",   "# fake: speedup=1.9",
                                   "# fake: runtime_error"};
  Proposal p = Source(Kernel("v" + std::to_string(call) + (ctx.large ? "L" : "S"), kMarkers[call % 7]));
  p.plan = {{"call", call}};  // what a proposer would need back to edit it
  return p;
}

TEST_F(SearchTest, MctsGrowsATreeOfLargeAndSmallSteps) {
  FakeProposer p;
  p.fallback = Varied;
  SearchConfig cfg = Config("mcts", 40, 3);
  cfg.backend = "cuda";
  cfg.hardware = "a fake GPU";
  cfg.rules = {"rule one", "rule two"};
  Ran r = RunSearch(&p, cfg);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.tree.size(), 41u);
  ASSERT_EQ(p.contexts.size(), 40u);
  EXPECT_EQ(r.tree.node(0).visits, 40);
  int small = 0, large_below_root = 0, pools = 0;
  for (int i = 1; i <= 40; ++i) {
    const Node& n = r.tree.node(i);
    const StepContext& ctx = p.contexts[i - 1];
    EXPECT_EQ(ctx.task, task_.name);
    EXPECT_EQ(ctx.prompt.task_source, task_.source);
    EXPECT_EQ(ctx.prompt.backend, "cuda");
    EXPECT_EQ(ctx.prompt.hardware, "a fake GPU");
    EXPECT_EQ(ctx.prompt.tolerance, "strict");
    EXPECT_DOUBLE_EQ(ctx.prompt.fp32_tol, 1e-4);
    EXPECT_EQ(ctx.prompt.rules, cfg.rules);
    EXPECT_EQ(n.kind == StepKind::kLarge, ctx.large) << "node " << i;
    EXPECT_EQ(n.plan, json({{"call", i - 1}})) << "the proposal's plan is kept with its node";
    const Node& parent = r.tree.node(n.parent);
    EXPECT_TRUE(parent.Expandable()) << "node " << i << " grew from an unexpandable node";
    if (n.parent == 0) {
      EXPECT_EQ(n.kind, StepKind::kLarge) << "the root always takes a large step";
    }
    if (!ctx.large) {
      ++small;
      EXPECT_EQ(ctx.prompt.parent.source, parent.source) << "node " << i;
      // ... and handed back, as data, to a small step from it.
      EXPECT_EQ(ctx.parent_plan, parent.plan) << "node " << i;
      EXPECT_EQ(ctx.parent_correct, parent.outcome.correct) << "node " << i;
      ASSERT_FALSE(ctx.prompt.path.empty());
      EXPECT_EQ(ctx.prompt.path.back().source, parent.source);
      EXPECT_LE(ctx.prompt.path.size(), 5u);
      for (const auto& k : ctx.prompt.path) EXPECT_NE(k.source, task_.source) << "the root is never in the path";
    } else {
      if (n.parent != 0) ++large_below_root;
      // The pool: correct kernels already in the tree, fastest first.
      EXPECT_LE(ctx.prompt.pool.size(), 5u);
      if (!ctx.prompt.pool.empty()) ++pools;
      for (const auto& k : ctx.prompt.pool) {
        EXPECT_EQ(k.verdict.rfind("correct, ", 0), 0u) << k.verdict;
        int id = NodeWithSource(r.tree, k.source);
        EXPECT_GT(id, 0);
        EXPECT_LT(id, i) << "the pool only shows kernels judged before";
      }
    }
  }
  for (const Node& n : r.tree.nodes()) EXPECT_LE(n.small_children, 2) << "small_step_limit";
  EXPECT_GT(small, 0);
  EXPECT_GT(large_below_root, 0);
  EXPECT_GT(pools, 0);
  EXPECT_EQ(r.result.status, "found");
  EXPECT_DOUBLE_EQ(r.result.best.speedup.at("eager"), 2.1);
}

TEST_F(SearchTest, MctsIsDeterministicForASeed) {
  FakeProposer p1, p2;
  p1.fallback = p2.fallback = Varied;
  Ran a = RunSearch(&p1, Config("mcts", 30, 9));
  Ran b = RunSearch(&p2, Config("mcts", 30, 9));
  EXPECT_EQ(a.tree.ToJson(), b.tree.ToJson());
}

TEST_F(SearchTest, IterativeRefinementFollowsOneChain) {
  FakeProposer p;
  p.fallback = [](const StepContext& ctx, int call) {
    if (call % 5 == 3) {
      Proposal none;
      none.note = "edits did not apply";
      return none;
    }
    if (call % 6 == 4) return Source(Kernel("v0L", "# fake: speedup=1.3"));  // a duplicate of the first
    return Varied(ctx, call);
  };
  Ran r = RunSearch(&p, Config("ir", 20));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.tree.size(), 21u);
  int tip = 0, dups = 0, nones = 0;
  for (int i = 1; i <= 20; ++i) {
    const Node& n = r.tree.node(i);
    EXPECT_EQ(n.parent, tip) << "node " << i << " is not on the chain";
    EXPECT_EQ(n.kind, tip == 0 ? StepKind::kLarge : StepKind::kSmall) << "node " << i;
    if (n.outcome.status == kStatusDuplicate) ++dups;
    if (n.outcome.status == kStatusNoCandidate) ++nones;
    if (!n.source.empty() && n.outcome.status != kStatusDuplicate) tip = i;  // the previous candidate
  }
  EXPECT_GT(dups, 0);
  EXPECT_GT(nones, 0);
  EXPECT_EQ(r.tree.node(0).children.size(), 1u);
}

TEST_F(SearchTest, BestOfNTakesIndependentLargeSteps) {
  FakeProposer p;
  p.fallback = Varied;
  Ran r = RunSearch(&p, Config("bon", 12));
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.tree.size(), 13u);
  for (int i = 1; i <= 12; ++i) {
    EXPECT_EQ(r.tree.node(i).parent, 0);
    EXPECT_EQ(r.tree.node(i).kind, StepKind::kLarge);
    EXPECT_TRUE(p.contexts[i - 1].large);
    EXPECT_TRUE(p.contexts[i - 1].prompt.pool.empty()) << "best-of-N steps are independent: no pool";
  }
  EXPECT_EQ(r.result.status, "found");
}

TEST_F(SearchTest, BudgetCheckStopsTheRun) {
  FakeProposer p;
  p.fallback = Varied;
  int checks = 0;
  auto store = OpenStore();
  Ran r = RunSearch(&p, Config("mcts", 10), store.get(), [&checks] {
    return ++checks > 3 ? Status::Error("token budget spent (1000 of 1000 tokens)") : Status::Ok();
  });
  ASSERT_TRUE(r.status.ok()) << "a spent budget is not a failure: " << r.status.message();
  EXPECT_EQ(r.result.status, "stopped: token budget spent (1000 of 1000 tokens)");
  EXPECT_EQ(r.result.steps_done, 3);
  EXPECT_EQ(r.tree.size(), 4u);
  EXPECT_EQ(p.contexts.size(), 3u);
  EXPECT_TRUE(BestPy().has_value()) << "what was found before the stop is kept";
  auto t = store->GetTask(task_.name);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)["status"], r.result.status);
}

TEST_F(SearchTest, WallTimeBudgetStopsTheRun) {
  FakeProposer p;
  p.fallback = [](const StepContext& ctx, int call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return Varied(ctx, call);
  };
  SearchConfig cfg = Config("mcts", 50);
  cfg.max_wall_s = 0.05;
  Ran r = RunSearch(&p, cfg);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.result.status, "stopped: wall-time budget spent");
  EXPECT_LT(r.result.steps_done, 50);
}

TEST_F(SearchTest, AStopRunProposalStopsTheRun) {
  FakeProposer p;
  Proposal stop;
  stop.note = "the LLM key was rejected (401)\nfull response: ...";
  stop.stop = Status::Error(StatusCode::kUnauthenticated, "the LLM key was rejected (401)");
  stop.infra_failure = true;
  p.script = {Source(Kernel("a", "# fake: speedup=1.5")), stop, Source(Kernel("never", ""))};
  Ran r = RunSearch(&p, Config("mcts", 5));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.result.status, "stopped: the LLM key was rejected (401)");
  EXPECT_EQ(r.result.stop.code(), StatusCode::kUnauthenticated) << "the reason is typed, not only text";
  EXPECT_EQ(r.result.steps_done, 1);
  EXPECT_EQ(r.tree.size(), 2u) << "the stopped step adds no node";
  EXPECT_EQ(p.contexts.size(), 2u);
  EXPECT_EQ(r.result.best_node, 1);
  EXPECT_TRUE(BestPy().has_value());
}

TEST_F(SearchTest, AJudgeFailureStopsTheRunWithItsReason) {
  FakeProposer p;
  p.script = {Source(Kernel("a", "# fake: speedup=1.5")), Source(Kernel("b", "# fake: judge_error"))};
  p.fallback = Varied;
  Ran r = RunSearch(&p, Config("mcts", 5));
  EXPECT_FALSE(r.status.ok());
  EXPECT_TRUE(Has(r.status.message(), "fake judge: the worker pool is gone")) << r.status.message();
  EXPECT_EQ(r.result.status, "stopped: fake judge: the worker pool is gone");
  EXPECT_EQ(p.contexts.size(), 2u);
}

TEST_F(SearchTest, TheStoreHoldsTreeVerdictsAndSummary) {
  FakeProposer p;
  p.fallback = Varied;
  auto store = OpenStore();
  Ran r = RunSearch(&p, Config("mcts", 8), store.get());
  ASSERT_TRUE(r.status.ok());
  auto tree = store->GetTree(task_.name);
  ASSERT_TRUE(tree.has_value());
  EXPECT_EQ(*tree, r.tree.ToJson());
  for (const Node& n : r.tree.nodes()) {
    if (n.kind == StepKind::kRoot || n.outcome.status == kStatusDuplicate || n.source.empty()) continue;
    auto v = store->GetVerdict(task_.name, Sha256Hex(n.source));
    ASSERT_TRUE(v.has_value()) << "node " << n.id;
    EXPECT_EQ(json::parse(*v)["status"], n.outcome.status);
  }
  auto t = store->GetTask(task_.name);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)["status"], "found");
  EXPECT_EQ((*t)["summary"]["steps"], 8);
  EXPECT_EQ((*t)["summary"]["best_node"], r.result.best_node);
  EXPECT_EQ(store->TaskNames(), std::vector<std::string>{task_.name});
}

// ================================================================ the LLM proposer

class LlmSearchTest : public SearchTest {
 protected:
  Ran RunLlm(FakeLlm* llm, SearchConfig cfg, RunStore* store, std::function<Status()> budget = {}) {
    caller_ = std::make_unique<LlmCaller>(llm, store, task_.name, 4096);
    LlmProposer proposer(&prompts_, caller_.get());
    return RunSearch(&proposer, std::move(cfg), store, std::move(budget));
  }
  std::unique_ptr<LlmCaller> caller_;
};

const std::string kK1 = Kernel("first", "# fake: speedup=1.5");

TEST_F(LlmSearchTest, ALargeStepTakesTheCodeFromTheReply) {
  FakeLlm llm;
  llm.Script("propose", Fenced(kK1));
  auto store = OpenStore();
  Ran r = RunLlm(&llm, Config("mcts", 1), store.get());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(Trim(r.tree.node(1).source), Trim(kK1));
  EXPECT_TRUE(r.tree.node(1).outcome.correct);
  EXPECT_EQ(llm.purposes(), std::vector<std::string>{"propose"});
  auto reqs = llm.requests();
  EXPECT_EQ(reqs[0].task, task_.name);
  EXPECT_EQ(reqs[0].max_tokens, 4096);
  EXPECT_TRUE(Has(reqs[0].messages[0].content, "## An example of the format")) << "nothing to show yet";
  EXPECT_TRUE(Has(reqs[0].system, "Triton kernels"));
  EXPECT_EQ(caller_->calls(), 1);
  EXPECT_TRUE(store->GetCall(task_.name, 0).has_value());
}

TEST_F(LlmSearchTest, FailedEditsLeaveANoCandidateNodeCarryingTheEditReport) {
  FakeLlm llm;
  llm.Script("propose", Fenced(kK1));
  llm.Script("revise", "- Use BLOCK = 2048.");
  llm.Script("tune", fakes::EditReply("    BLOCK = 4096", "    BLOCK = 2048"));
  llm.Script("tune-retry", fakes::EditReply("    BLOCK = 8192", "    BLOCK = 2048"));
  Ran r = RunLlm(&llm, Config("ir", 2), nullptr);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(llm.purposes(), (std::vector<std::string>{"propose", "revise", "tune", "tune-retry"}));
  ASSERT_EQ(r.tree.size(), 3u);
  const Node& n = r.tree.node(2);
  EXPECT_EQ(n.kind, StepKind::kSmall);
  EXPECT_EQ(n.parent, 1);
  EXPECT_EQ(n.outcome.status, kStatusNoCandidate);
  EXPECT_TRUE(n.source.empty());
  EXPECT_TRUE(Has(n.note, "guidance:\n- Use BLOCK = 2048.")) << n.note;
  EXPECT_TRUE(Has(n.note, "no edit applied:")) << n.note;
  EXPECT_TRUE(Has(n.note, "edit 1: old_str matches nothing in the kernel")) << n.note;
  EXPECT_TRUE(Has(n.note, "BLOCK = 8192")) << "the report of the last attempt: " << n.note;
  EXPECT_EQ(n.outcome.error, n.note);
  EXPECT_EQ(judge_.search_calls(), 1);
}

TEST_F(LlmSearchTest, TheTunerRetryIsToldWhyTheEditsFailed) {
  FakeLlm llm;
  llm.Script("propose", Fenced(kK1));
  llm.Script("revise", "- Use BLOCK = 2048.");
  llm.Script("tune", fakes::EditReply("    BLOCK = 4096", "    BLOCK = 2048"));
  llm.Script("tune-retry",
             fakes::EditReply("        BLOCK = 1024", "        BLOCK = 2048") +
                 fakes::EditReply("# fake: speedup=1.5", "# fake: speedup=2.25", 2));
  Ran r = RunLlm(&llm, Config("ir", 2), nullptr);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  auto reqs = llm.requests();
  ASSERT_EQ(reqs.size(), 4u);
  const std::string& first = reqs[2].messages[0].content;
  const std::string& retry = reqs[3].messages[0].content;
  EXPECT_EQ(reqs[3].purpose, "tune-retry");
  EXPECT_FALSE(Has(first, "## Your previous edits could not be applied"));
  EXPECT_TRUE(Has(retry, "## Your previous edits could not be applied\n\nedit 1: old_str matches nothing in the kernel"))
      << retry;
  EXPECT_TRUE(Has(retry, "BLOCK = 4096")) << "the failed edit's first line is quoted back";
  EXPECT_TRUE(Has(first, "## Guidance\n\n- Use BLOCK = 2048."));
  EXPECT_TRUE(Has(retry, "## Guidance\n\n- Use BLOCK = 2048."));
  EXPECT_TRUE(Has(first, "# kernel first")) << "the tuner is shown the parent";

  const Node& n = r.tree.node(2);
  EXPECT_EQ(n.kind, StepKind::kSmall);
  EXPECT_TRUE(Has(n.source, "        BLOCK = 2048\n"));
  EXPECT_TRUE(n.outcome.correct);
  EXPECT_DOUBLE_EQ(n.outcome.speedup, 2.25);
  EXPECT_EQ(n.note, "guidance:\n- Use BLOCK = 2048.");
}

TEST_F(LlmSearchTest, PartlyAppliedEditsKeepTheReportInTheNote) {
  FakeLlm llm;
  llm.Script("propose", Fenced(kK1));
  llm.Script("revise", "- Faster.");
  llm.Script("tune", fakes::EditReply("# fake: speedup=1.5", "# fake: speedup=1.75") +
                         fakes::EditReply("    not in the kernel", "    x = 1", 2));
  Ran r = RunLlm(&llm, Config("ir", 2), nullptr);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(llm.purposes(), (std::vector<std::string>{"propose", "revise", "tune"})) << "no retry when one applied";
  const Node& n = r.tree.node(2);
  EXPECT_TRUE(Has(n.source, "# fake: speedup=1.75"));
  EXPECT_TRUE(Has(n.note, "edits:\nedit 1: applied")) << n.note;
  EXPECT_TRUE(Has(n.note, "edit 2: old_str matches nothing")) << n.note;
}

TEST_F(LlmSearchTest, TheReviserSeesTheRecentPathWithErrors) {
  FakeLlm llm;
  llm.Script("propose", Fenced(Kernel("broken", "# fake: compile_error")));
  llm.Script("revise", "- Fix the syntax error.");
  llm.Script("tune", fakes::EditReply("# fake: compile_error", "# fake: speedup=1.5"));
  llm.Script("revise", "- Now make it faster.");
  llm.Script("tune", fakes::EditReply("# fake: speedup=1.5", "# fake: speedup=1.8"));
  Ran r = RunLlm(&llm, Config("ir", 3), nullptr);
  ASSERT_TRUE(r.status.ok());
  auto reqs = llm.requests();
  ASSERT_EQ(reqs.size(), 5u);
  const std::string& rev1 = reqs[1].messages[0].content;
  const std::string& rev2 = reqs[3].messages[0].content;
  EXPECT_TRUE(Has(rev1, "### Attempt 1: compile_error: fake compile_error: line 3\n\n```\nfake compile_error: line 3\n"))
      << rev1;
  EXPECT_FALSE(Has(rev1, "### Attempt 2"));
  EXPECT_TRUE(Has(rev2, "### Attempt 1: compile_error")) << rev2;
  EXPECT_TRUE(Has(rev2, "### Attempt 2: correct, 1.500x vs eager PyTorch (0.6667 ms)")) << rev2;
  EXPECT_TRUE(Has(rev2, "Made from this guidance or feedback:\nguidance:\n- Fix the syntax error.")) << rev2;
  EXPECT_TRUE(Has(reqs[4].messages[0].content, "Its current verdict:\ncorrect, 1.500x"));
  EXPECT_DOUBLE_EQ(r.tree.node(3).outcome.speedup, 1.8);
}

TEST_F(LlmSearchTest, LargeStepsShowThePoolExceptInBestOfN) {
  FakeLlm llm;
  Ran r = RunLlm(&llm, Config("mcts", 25, 5), nullptr);
  ASSERT_TRUE(r.status.ok());
  int with_pool = 0, proposes = 0;
  for (const auto& q : llm.requests()) {
    if (q.purpose != "propose") continue;
    ++proposes;
    const std::string& u = q.messages[0].content;
    const bool pool = Has(u, "## Earlier kernels for this task"), example = Has(u, "## An example of the format");
    EXPECT_NE(pool, example) << "a large step shows either the pool or the example";
    with_pool += pool;
  }
  EXPECT_GT(with_pool, 0);

  FakeLlm bon_llm;
  Ran b = RunLlm(&bon_llm, Config("bon", 8), nullptr);
  ASSERT_TRUE(b.status.ok());
  for (const auto& q : bon_llm.requests()) {
    EXPECT_EQ(q.purpose, "propose");
    EXPECT_FALSE(Has(q.messages[0].content, "## Earlier kernels"));
  }
}

TEST_F(LlmSearchTest, ARejectedKeyStopsTheRun) {
  FakeLlm llm;
  llm.ScriptError("propose", llm::ErrorKind::kAuth, "401 Unauthorized: invalid API key");
  Ran r = RunLlm(&llm, Config("mcts", 5), nullptr);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.result.status, "stopped: the proposer call failed: 401 Unauthorized: invalid API key");
  EXPECT_EQ(r.result.steps_done, 0);
  EXPECT_EQ(r.tree.size(), 1u);
  EXPECT_EQ(llm.calls(), 1);
  EXPECT_EQ(judge_.search_calls(), 0);
  EXPECT_FALSE(BestPy().has_value());
}

TEST_F(LlmSearchTest, ATimedOutCallSpendsAStepButAddsNoNode) {
  // An LLM outage is not the kernel's fault: no node, no reward, but the
  // step counts against the budget.
  FakeLlm llm;
  llm.ScriptError("propose", llm::ErrorKind::kTimeout, "no reply within 600 s");
  Ran r = RunLlm(&llm, Config("mcts", 3), nullptr);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.result.steps_done, 3);
  EXPECT_EQ(r.tree.size(), 3u);  // the root and the two steps after the outage
  for (size_t i = 0; i < r.tree.size(); ++i) {
    EXPECT_EQ(r.tree.node(static_cast<int>(i)).note.find("no reply within"), std::string::npos);
  }
}

TEST_F(LlmSearchTest, TheStoredSummaryCountsTheLlmCalls) {
  // The task's stored summary carries the proposer's LLM call counts.
  FakeLlm llm;
  auto store = OpenStore();
  Ran r = RunLlm(&llm, Config("mcts", 4), store.get());
  ASSERT_TRUE(r.status.ok());
  auto t = store->GetTask(task_.name);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)["summary"]["llm_calls"], caller_->calls());
}

// ================================================================ LlmCaller

RenderedPrompt Prompt(const std::string& user) { return RenderedPrompt{"system text", user}; }

TEST_F(SearchTest, LlmCallerReplaysStoredCallsByNumberAndRequest) {
  auto store = OpenStore();
  FakeLlm live;
  live.Script("propose", "reply 0");
  live.Script("revise", "reply 1");
  {
    LlmCaller c(&live, store.get(), "t", 100);
    EXPECT_EQ(c.Ask("propose", Prompt("a"), nullptr).reply.text, "reply 0");
    EXPECT_EQ(c.Ask("revise", Prompt("b"), nullptr).reply.text, "reply 1");
    EXPECT_EQ(c.calls(), 2);
    EXPECT_EQ(c.replayed(), 0);
  }
  FakeLlm dead;
  dead.FailEverything(llm::ErrorKind::kAuth, "must not be asked");
  LlmCaller c(&dead, store.get(), "t", 100);
  EXPECT_EQ(c.Ask("propose", Prompt("a"), nullptr).reply.text, "reply 0");
  EXPECT_EQ(c.Ask("revise", Prompt("b"), nullptr).reply.text, "reply 1");
  EXPECT_EQ(c.replayed(), 2);
  EXPECT_EQ(dead.calls(), 0);
  // Past the recorded calls, or with another request under a recorded
  // number, the client is asked.
  EXPECT_FALSE(c.Ask("tune", Prompt("c"), nullptr).ok());
  EXPECT_EQ(dead.calls(), 1);
  LlmCaller other(&dead, store.get(), "t", 100);
  EXPECT_FALSE(other.Ask("propose", Prompt("a, changed"), nullptr).ok());
  EXPECT_EQ(dead.calls(), 2);
  // Another task has its own numbering.
  LlmCaller task2(&dead, store.get(), "t2", 100);
  EXPECT_FALSE(task2.Ask("propose", Prompt("a"), nullptr).ok());
}

TEST_F(SearchTest, LlmCallerAsksAgainWhatFailedForInfrastructureReasons) {
  auto store = OpenStore();
  FakeLlm flaky;
  flaky.ScriptError("propose", llm::ErrorKind::kRateLimited, "429 after 5 attempts");
  {
    LlmCaller c(&flaky, store.get(), "t", 100);
    EXPECT_FALSE(c.Ask("propose", Prompt("a"), nullptr).ok());
  }
  FakeLlm good;
  good.Script("propose", "now it works");
  {
    LlmCaller c(&good, store.get(), "t", 100);
    EXPECT_EQ(c.Ask("propose", Prompt("a"), nullptr).reply.text, "now it works");
    EXPECT_EQ(c.replayed(), 0);
    EXPECT_EQ(good.calls(), 1);
  }
  FakeLlm dead;
  dead.FailEverything(llm::ErrorKind::kAuth, "must not be asked");
  LlmCaller c(&dead, store.get(), "t", 100);
  EXPECT_EQ(c.Ask("propose", Prompt("a"), nullptr).reply.text, "now it works");
  EXPECT_EQ(dead.calls(), 0);
}

TEST_F(SearchTest, LlmCallerAsksAgainAfterARejectedKey) {
  // A run stopped by a rejected key (401), a spent quota, an unknown model or
  // a bad configuration is resumed after the user fixed the cause; the call
  // that failed must then be asked again, not replayed from the store.
  // src/search/proposer.cpp:39 only re-asks InfraError kinds, so a recorded
  // kAuth / kQuota / kConfig / kNotFound failure is replayed and the resumed
  // run stops at once with the old error, however often it is resumed.
  auto store = OpenStore();
  FakeLlm rejected;
  rejected.ScriptError("propose", llm::ErrorKind::kAuth, "401 Unauthorized: invalid API key");
  {
    LlmCaller c(&rejected, store.get(), "t", 100);
    EXPECT_FALSE(c.Ask("propose", Prompt("a"), nullptr).ok());
  }
  FakeLlm fixed;
  fixed.Script("propose", "works with the new key");
  LlmCaller c(&fixed, store.get(), "t", 100);
  EXPECT_EQ(c.Ask("propose", Prompt("a"), nullptr).reply.text, "works with the new key");
  EXPECT_EQ(fixed.calls(), 1);
}

TEST_F(SearchTest, AFatalStopStillFillsTheResultAndTheStore) {
  // src/search/search.cpp:219-222: when the judge or the store fails, Run returns
  // right after the loop (the `if (!fatal.ok())` block before the final
  // re-timing), before result->judged / judge_reused / wall_s are filled and
  // before PutTask: the summary says "judged 0" for a task that judged
  // candidates, and the store has no row for the task.
  FakeProposer p;
  p.script = {Source(Kernel("a", "# fake: speedup=1.5")), Source(Kernel("b", "# fake: judge_error"))};
  auto store = OpenStore();
  Ran r = RunSearch(&p, Config("mcts", 5), store.get());
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.result.judged, 1);
  EXPECT_GT(r.result.wall_s, 0);
  auto t = store->GetTask(task_.name);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)["status"], r.result.status);
}

TEST_F(SearchTest, AnInfrastructureFailureIsNotCountedAgainstTheNode) {
  // Proposal::infra_failure: the LLM failed (network, quota), not the
  // kernel; the node it hit keeps its statistics.
  FakeProposer p;
  Proposal outage;
  outage.note = "the reviser call failed: no reply within 600 s";
  outage.infra_failure = true;
  p.script = {Source(Kernel("a", "# fake: speedup=2.0")), outage};
  Ran r = RunSearch(&p, Config("ir", 2));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.tree.node(1).visits, 1);
  EXPECT_DOUBLE_EQ(r.tree.Q(1), Reward(r.tree.node(1).outcome, RewardConfig{}));
}

// ================================================================ resume

class ResumeTest : public LlmSearchTest, public ::testing::WithParamInterface<const char*> {
 protected:
  // The first answers are scripted so that every run holds a compile error,
  // a correct kernel and (with small steps) a failed edit, whatever the
  // templates make of the default answers; the rest come from DefaultReply.
  static void ScriptCoverage(FakeLlm* llm) {
    llm->Script("propose", Fenced(Kernel("resume-bad", "# fake: compile_error")));
    llm->Script("propose", Fenced(Kernel("resume-good", "# fake: speedup=1.25")));
    llm->Script("tune", fakes::EditReply("    not in any kernel", "    pass"));
    llm->Script("tune-retry", fakes::EditReply("    not in any kernel either", "    pass"));
  }
};

TEST_P(ResumeTest, ASecondRunOnTheStoreAsksAndJudgesNothingAgain) {
  const int kSteps = 16;
  SearchConfig cfg = Config(GetParam(), kSteps, 11);
  auto store = OpenStore();
  FakeLlm live;
  ScriptCoverage(&live);
  Ran first = RunLlm(&live, cfg, store.get());
  ASSERT_TRUE(first.status.ok()) << first.status.message();
  ASSERT_EQ(first.result.steps_done, kSteps);
  const int first_calls = caller_->calls();
  const int first_judged = judge_.search_calls();
  const int first_retimed = judge_.retime_calls();
  EXPECT_EQ(first_calls, live.calls());
  EXPECT_EQ(first.result.judged, first_judged);
  const auto first_best = BestPy();

  // The scenario covers what a resume must replay.
  int small = 0, failed = 0, correct = 0, no_candidate = 0;
  for (const Node& n : first.tree.nodes()) {
    small += n.kind == StepKind::kSmall;
    failed += n.judged && !n.outcome.correct && !n.source.empty() && n.outcome.status != kStatusDuplicate;
    correct += n.outcome.correct;
    no_candidate += n.outcome.status == kStatusNoCandidate;
  }
  EXPECT_GT(correct, 0);
  EXPECT_GT(failed, 0);
  if (std::string(GetParam()) != "bon") {
    EXPECT_GT(small, 0);
  }
  if (std::string(GetParam()) != "bon") {
    EXPECT_GT(no_candidate, 0) << "a failed edit";
  }

  judge_.Reset();
  FakeLlm dead;
  dead.FailEverything(llm::ErrorKind::kAuth, "resume asked the LLM again");
  Ran second = RunLlm(&dead, cfg, store.get());
  ASSERT_TRUE(second.status.ok()) << second.status.message();
  EXPECT_EQ(second.result.status, first.result.status);
  EXPECT_EQ(second.tree.ToJson(), first.tree.ToJson());
  EXPECT_EQ(dead.calls(), 0);
  EXPECT_EQ(caller_->calls(), first_calls);
  EXPECT_EQ(caller_->replayed(), first_calls);
  EXPECT_EQ(judge_.search_calls(), 0) << "every verdict comes from the store";
  EXPECT_EQ(second.result.judged, 0);
  EXPECT_EQ(second.result.judge_reused, first_judged);
  // The final re-timing always measures again.
  EXPECT_EQ(judge_.retime_calls(), first_retimed);
  EXPECT_EQ(static_cast<size_t>(judge_.retime_calls()), first.tree.BestCorrect(3).size());
  EXPECT_EQ(second.result.best_node, first.result.best_node);
  EXPECT_EQ(BestPy(), first_best);
}

TEST_P(ResumeTest, ARunKilledMidwayAndResumedEndsWithTheSameTree) {
  const int kSteps = 16;
  SearchConfig cfg = Config(GetParam(), kSteps, 11);
  // The uninterrupted run.
  auto whole_store = OpenStore("whole.sqlite");
  FakeLlm whole_llm;
  ScriptCoverage(&whole_llm);
  Ran whole = RunLlm(&whole_llm, cfg, whole_store.get());
  ASSERT_TRUE(whole.status.ok()) << whole.status.message();
  const int whole_judged = judge_.search_calls();

  // The same run stopped after 6 steps, then resumed. The client goes on
  // where it was (the fake answers a repeated request differently, as a
  // sampling model does), so what the resumed run asks anew gets the answers
  // the uninterrupted run got.
  judge_.Reset();
  auto store = OpenStore("killed.sqlite");
  FakeLlm llm;
  ScriptCoverage(&llm);
  SearchConfig part = cfg;
  part.steps = 6;
  Ran killed = RunLlm(&llm, part, store.get());
  ASSERT_TRUE(killed.status.ok());
  const int killed_calls = llm.calls();
  const int killed_judged = judge_.search_calls();
  judge_.Reset();
  Ran resumed = RunLlm(&llm, cfg, store.get());
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.message();
  EXPECT_EQ(resumed.tree.ToJson(), whole.tree.ToJson());
  EXPECT_EQ(caller_->replayed(), killed_calls);
  EXPECT_EQ(llm.calls(), whole_llm.calls()) << "nothing was asked twice";
  EXPECT_EQ(judge_.search_calls(), whole_judged - killed_judged) << "nothing was judged twice";
  EXPECT_EQ(resumed.result.judge_reused, killed_judged);
}

TEST_P(ResumeTest, ARunKilledBetweenTheLlmAndTheJudgeEndsWithTheSameTree) {
  const int kSteps = 14;
  SearchConfig cfg = Config(GetParam(), kSteps, 5);
  auto whole_store = OpenStore("whole.sqlite");
  FakeLlm whole_llm;
  ScriptCoverage(&whole_llm);
  Ran whole = RunLlm(&whole_llm, cfg, whole_store.get());
  ASSERT_TRUE(whole.status.ok()) << whole.status.message();
  const int whole_judged = judge_.search_calls();
  ASSERT_GE(whole_judged, 4);

  // The judge dies on the 4th candidate: its LLM calls are in the store, its
  // verdict is not.
  judge_.Reset();
  judge_.FailFrom(3);
  auto store = OpenStore("killed.sqlite");
  FakeLlm llm;
  ScriptCoverage(&llm);
  Ran killed = RunLlm(&llm, cfg, store.get());
  ASSERT_FALSE(killed.status.ok());
  EXPECT_EQ(killed.result.status, "stopped: fake judge: killed");
  judge_.Reset();
  judge_.FailFrom(-1);
  Ran resumed = RunLlm(&llm, cfg, store.get());
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.message();
  EXPECT_EQ(resumed.tree.ToJson(), whole.tree.ToJson());
  EXPECT_EQ(llm.calls(), whole_llm.calls()) << "the killed step's calls were replayed, not asked again";
  EXPECT_EQ(judge_.search_calls(), whole_judged - 3);
  EXPECT_EQ(resumed.result.judge_reused, 3);
}

INSTANTIATE_TEST_SUITE_P(Methods, ResumeTest, ::testing::Values("mcts", "ir", "bon"));

}  // namespace
}  // namespace ax::search
