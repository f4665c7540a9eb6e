// Loading run folders: the store's tables into RunData, errors for folders
// that are not runs, calls mapped to the nodes they made.
#include "report/run_data.h"

#include <gtest/gtest.h>

#include <fstream>

#include "run_fixture.h"

namespace ax::report {
namespace {

using testing::MakeBenchRun;
using testing::TempDir;

const TaskData& Task(const RunData& r, const std::string& name) {
  for (const auto& t : r.tasks)
    if (t.name == name) return t;
  throw std::runtime_error("no task " + name);
}

TEST(LoadRun, BenchRunTasksInConfigOrder) {
  std::string dir = MakeBenchRun(TempDir("load") / "run");
  RunData r;
  Status s = LoadRun(dir, &r);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_EQ(r.tasks[0].name, "alpha");
  EXPECT_EQ(r.tasks[1].name, "beta");
  EXPECT_EQ(r.tasks[2].name, "gamma");
  EXPECT_EQ(r.config.value("search", ""), "mcts");
}

TEST(LoadRun, FoundTaskUsesTheRetimedSummary) {
  RunData r;
  ASSERT_TRUE(LoadRun(MakeBenchRun(TempDir("load") / "run"), &r).ok());
  const TaskData& a = Task(r, "alpha");
  EXPECT_EQ(a.status, "found");
  EXPECT_TRUE(a.has_summary);
  EXPECT_EQ(a.best_node, 3);
  ASSERT_TRUE(a.speedup_eager && a.speedup_compile);
  EXPECT_DOUBLE_EQ(*a.speedup_eager, 2.4);  // re-timed, not the search's 2.5
  EXPECT_DOUBLE_EQ(*a.speedup_compile, 1.1);
  EXPECT_DOUBLE_EQ(*a.baseline_eager_ms, 2.0);
  EXPECT_EQ(a.steps, 3);
  EXPECT_EQ(a.judged, 3);
  EXPECT_EQ(a.llm_calls, 5);  // counted from the store, not the summary's 0
  EXPECT_FALSE(a.degenerate);
  EXPECT_NE(a.best_file.find("alpha/best.py"), std::string::npos);
  EXPECT_EQ(a.best_source.rfind("# adaexplore: best kernel for alpha", 0), 0u);
  // Nodes with their verdicts: speedup vs compile comes from the verdict.
  ASSERT_EQ(a.nodes.size(), 4u);
  EXPECT_EQ(a.nodes[1].status, "compile_error");
  EXPECT_FALSE(a.nodes[1].speedup_eager.has_value());
  EXPECT_TRUE(a.nodes[1].verdict.is_object());
  EXPECT_DOUBLE_EQ(*a.nodes[3].speedup_eager, 2.5);
  EXPECT_DOUBLE_EQ(*a.nodes[3].speedup_compile, 1.2);
  EXPECT_EQ(a.nodes[3].kind, "small");
  EXPECT_TRUE(a.nodes[0].verdict.is_null());
}

TEST(LoadRun, CallsMapToTheStepsThatMadeEachNode) {
  RunData r;
  ASSERT_TRUE(LoadRun(MakeBenchRun(TempDir("load") / "run"), &r).ok());
  const TaskData& a = Task(r, "alpha");
  EXPECT_TRUE(a.nodes[0].calls.empty());
  EXPECT_EQ(a.nodes[1].calls, std::vector<int>({0}));
  EXPECT_EQ(a.nodes[2].calls, std::vector<int>({1}));
  EXPECT_EQ(a.nodes[3].calls, std::vector<int>({2, 3, 4}));  // revise, tune, tune-retry
  EXPECT_EQ(a.calls[2].prompt, "PROMPT-A3 revise");
  EXPECT_EQ(a.calls[0].system, "You write fast kernels.");
  EXPECT_EQ(a.calls[4].purpose, "tune-retry");
}

TEST(LoadRun, CostSummedFromCallsAndVerdicts) {
  RunData r;
  ASSERT_TRUE(LoadRun(MakeBenchRun(TempDir("load") / "run"), &r).ok());
  const TaskData& a = Task(r, "alpha");
  EXPECT_EQ(a.cost.llm_calls, 5);
  EXPECT_EQ(a.cost.input_tokens, 1500);
  EXPECT_EQ(a.cost.output_tokens, 150);
  EXPECT_NEAR(a.cost.usd, 0.15, 1e-12);
  EXPECT_NEAR(a.cost.llm_latency_s, 15, 1e-12);
  EXPECT_DOUBLE_EQ(a.cost.wall_s, 12.5);
  EXPECT_DOUBLE_EQ(a.cost.judge_s, 4.5);
  EXPECT_EQ(a.cost.judged, 3);
  ASSERT_EQ(a.cost_by_purpose.count("tune"), 1u);
  EXPECT_EQ(a.cost_by_purpose.at("propose").llm_calls, 2);
  EXPECT_EQ(a.cost_by_purpose.at("tune").input_tokens, 400);
}

TEST(LoadRun, DegenerateAndFailedTask) {
  RunData r;
  ASSERT_TRUE(LoadRun(MakeBenchRun(TempDir("load") / "run"), &r).ok());
  const TaskData& b = Task(r, "beta");
  EXPECT_EQ(b.status, "none");
  EXPECT_TRUE(b.degenerate);
  EXPECT_EQ(b.best_node, -1);
  EXPECT_FALSE(b.speedup_eager.has_value());
  EXPECT_TRUE(b.best_source.empty());
  EXPECT_TRUE(b.best_file.empty());
  EXPECT_TRUE(b.nodes[2].verdict.is_null());  // a duplicate was never judged
  TaskOutcome o = ToOutcome(b);
  EXPECT_FALSE(o.correct);
  EXPECT_TRUE(o.degenerate);
  EXPECT_EQ(o.step_speedups, std::vector<double>({0, 0}));
}

TEST(LoadRun, IncompleteTaskFallsBackToTheBestJudgedNode) {
  RunData r;
  ASSERT_TRUE(LoadRun(MakeBenchRun(TempDir("load") / "run"), &r).ok());
  const TaskData& g = Task(r, "gamma");
  EXPECT_EQ(g.status, "incomplete");
  EXPECT_FALSE(g.has_summary);
  EXPECT_EQ(g.best_node, 1);
  EXPECT_DOUBLE_EQ(*g.speedup_eager, 0.8);
  EXPECT_DOUBLE_EQ(*g.speedup_compile, 0.5);
  EXPECT_EQ(g.best_source, testing::Src("g1"));  // no best.py: the node's source
  TaskOutcome o = ToOutcome(g);
  EXPECT_TRUE(o.correct);
  EXPECT_EQ(o.step_speedups, std::vector<double>({0.8}));
}

TEST(LoadRun, OptimizeRunReadsBestPyAtTheTop) {
  std::string dir = testing::MakeOptimizeRun(TempDir("opt") / "run", "solo", 3.0, 2.0);
  RunData r;
  ASSERT_TRUE(LoadRun(dir, &r).ok());
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].best_source.rfind("# best\n", 0), 0u);
}

TEST(LoadRun, ErrorsAreOneLine) {
  auto d = TempDir("err");
  RunData r;
  auto one_line = [](const Status& s) { return !s.ok() && s.message().find('\n') == std::string::npos; };
  Status s = LoadRun((d / "missing").string(), &r);
  EXPECT_TRUE(one_line(s));
  EXPECT_NE(s.message().find("no such directory"), std::string::npos) << s.message();
  s = LoadRun(d.string(), &r);
  EXPECT_TRUE(one_line(s));
  EXPECT_NE(s.message().find("no run.sqlite"), std::string::npos) << s.message();
  std::ofstream(d / "run.sqlite") << "this is not a database, just text that is long enough to have a header............";
  s = LoadRun(d.string(), &r);
  EXPECT_TRUE(one_line(s));
  EXPECT_NE(s.message().find("not a readable run store"), std::string::npos) << s.message();
}

TEST(LoadRun, SqliteFileThatIsNotARunStore) {
  auto d = TempDir("other");
  // An empty file is a valid empty SQLite database without our tables.
  std::ofstream(d / "run.sqlite").close();
  RunData r;
  Status s = LoadRun(d.string(), &r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no such table"), std::string::npos) << s.message();
}

TEST(LoadRun, EmptyStoreIsAnEmptyRun) {
  auto d = TempDir("empty");
  std::unique_ptr<search::RunStore> s;
  ASSERT_TRUE(search::RunStore::Open((d / "run.sqlite").string(), &s).ok());
  s.reset();
  RunData r;
  Status st = LoadRun(d.string(), &r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(r.tasks.empty());
  EXPECT_TRUE(r.config.is_object());
}

}  // namespace
}  // namespace ax::report
