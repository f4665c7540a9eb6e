// The renderers: terminal summary, JSON, CSV, A/B comparison and HTML.
#include "report/report.h"

#include <gtest/gtest.h>

#include "run_fixture.h"

namespace ax::report {
namespace {

using nlohmann::json;
using testing::TempDir;

Report Bench() {
  RunData r;
  Status s = LoadRun(testing::MakeBenchRun(TempDir("rep") / "run"), &r);
  EXPECT_TRUE(s.ok()) << s.message();
  return MakeReport(std::move(r));
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(Report, MetricsOfTheFixture) {
  Report r = Bench();
  const RunMetrics& m = r.metrics;
  EXPECT_EQ(m.all.tasks, 3);
  EXPECT_EQ(m.all.correct, 2);  // alpha (found) and gamma (incomplete, 0.8x)
  EXPECT_EQ(m.degenerate, 1);
  EXPECT_EQ(m.non_degenerate.tasks, 2);
  EXPECT_NEAR(m.all.eager.geomean, std::sqrt(2.4 * 0.8), 1e-12);
  EXPECT_NEAR(m.all.eager.user_score, std::cbrt(2.4), 1e-12);
  EXPECT_NEAR(m.non_degenerate.eager.user_score, std::sqrt(2.4), 1e-12);
  // Scaling over 3 steps: alpha 0, 1.5, 2.5; beta none; gamma 0.8 (then stops).
  ASSERT_EQ(m.scaling.size(), 3u);
  EXPECT_DOUBLE_EQ(m.scaling[0].user_score, 1);
  EXPECT_NEAR(m.scaling[0].correct_fraction, 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.scaling[1].user_score, std::cbrt(1.5), 1e-12);
  EXPECT_NEAR(m.scaling[2].user_score, std::cbrt(2.5), 1e-12);
  EXPECT_EQ(m.cost.llm_calls, 8);
}

TEST(Report, TextSummaryHasTableAndHeadline) {
  std::string t = TextSummary(Bench());
  EXPECT_NE(t.find("alpha"), std::string::npos);
  EXPECT_NE(t.find("2.400x"), std::string::npos);
  EXPECT_NE(t.find("1.100x"), std::string::npos);
  EXPECT_NE(t.find("incomplete"), std::string::npos);
  EXPECT_NE(t.find("(degenerate)"), std::string::npos);
  EXPECT_NE(t.find("correct 2/3"), std::string::npos);
  EXPECT_NE(t.find("excluding 1 degenerate task (beta)"), std::string::npos);
  EXPECT_NE(t.find("user score"), std::string::npos);
  EXPECT_NE(t.find("fast_p"), std::string::npos);
  EXPECT_NE(t.find("8 LLM calls"), std::string::npos);
}

TEST(Report, JsonHasTasksAndAggregates) {
  json j = ReportJson(Bench());
  ASSERT_EQ(j["tasks"].size(), 3u);
  EXPECT_EQ(j["tasks"][0]["task"], "alpha");
  EXPECT_DOUBLE_EQ(j["tasks"][0]["speedup"]["eager"].get<double>(), 2.4);
  EXPECT_TRUE(j["tasks"][1]["speedup"]["eager"].is_null());
  EXPECT_EQ(j["tasks"][1]["degenerate"], true);
  EXPECT_EQ(j["tasks"][2]["complete"], false);
  EXPECT_EQ(j["metrics"]["all"]["correct"], 2);
  EXPECT_EQ(j["metrics"]["degenerate"], 1);
  EXPECT_DOUBLE_EQ(j["metrics"]["all"]["eager"]["fast_p"]["1"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(j["metrics"]["all"]["eager"]["clamp"].get<double>(), 10);
  EXPECT_EQ(j["metrics"]["scaling"].size(), 3u);
  EXPECT_EQ(j["metrics"]["cost"]["llm_calls"], 8);
}

TEST(Report, CsvIsTidyAndQuoted) {
  std::string c = ReportCsv(Bench(), "run");
  EXPECT_EQ(c.rfind("run,scope,name,baseline,metric,value\n", 0), 0u);
  EXPECT_NE(c.find("run,task,alpha,eager,speedup,2.4\n"), std::string::npos);
  EXPECT_NE(c.find("run,task,alpha,compile,speedup,1.1\n"), std::string::npos);
  EXPECT_NE(c.find("run,all,,eager,fast_1,0.333333\n"), std::string::npos);
  EXPECT_NE(c.find("run,non_degenerate,,,tasks,2\n"), std::string::npos);
  EXPECT_NE(c.find("run,scaling,3,eager,user_score,"), std::string::npos);
  // Every line has 6 fields (no field here holds a comma).
  size_t start = 0;
  while (start < c.size()) {
    size_t end = c.find('\n', start);
    std::string line = c.substr(start, end - start);
    EXPECT_EQ(Count(line, ","), 5u) << line;
    start = end + 1;
  }
}

TEST(Report, CompareMatchesTasksByName) {
  auto d = TempDir("ab");
  RunData a, b;
  ASSERT_TRUE(LoadRun(testing::MakeBenchRun(d / "a"), &a).ok());
  ASSERT_TRUE(LoadRun(testing::MakeOptimizeRun(d / "b", "alpha", 4.8, 2.2), &b).ok());
  Report ra = MakeReport(std::move(a)), rb = MakeReport(std::move(b));
  Comparison c = Compare(ra, rb);
  EXPECT_EQ(c.common, 1);
  EXPECT_EQ(c.only_a, 2);
  EXPECT_EQ(c.only_b, 0);
  ASSERT_EQ(c.tasks.size(), 3u);
  EXPECT_EQ(c.tasks[0].name, "alpha");
  ASSERT_TRUE(c.tasks[0].eager_ratio.has_value());
  EXPECT_NEAR(*c.tasks[0].eager_ratio, 2.0, 1e-12);
  EXPECT_NEAR(*c.tasks[0].compile_ratio, 2.0, 1e-12);
  EXPECT_FALSE(c.tasks[1].in_b);
  // Aggregates over alpha only.
  EXPECT_NEAR(c.a.all.eager.user_score, 2.4, 1e-12);
  EXPECT_NEAR(c.b.all.eager.user_score, 4.8, 1e-12);
  std::string t = TextComparison(c);
  EXPECT_NE(t.find("1 tasks in both, 2 only in A"), std::string::npos) << t;
  EXPECT_NE(t.find("+2.400"), std::string::npos) << t;
  json j = ComparisonJson(c);
  EXPECT_DOUBLE_EQ(j["tasks"][0]["ratio_b_over_a"]["eager"].get<double>(), 2.0);
  EXPECT_EQ(j["tasks"][1]["in_b"], false);
}

TEST(Html, EscapeHelpers) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  json j = {{"s", "</script><!-- & \u2028 x"}};
  std::string s = ScriptSafeJson(j);
  EXPECT_EQ(s.find('<'), std::string::npos);
  EXPECT_EQ(s.find('>'), std::string::npos);
  EXPECT_EQ(s.find('&'), std::string::npos);
  EXPECT_EQ(s.find("\xE2\x80\xA8"), std::string::npos);
  EXPECT_EQ(json::parse(s), j);  // the same data
}

TEST(Html, SelfContainedAndEscaped) {
  Report r = Bench();
  std::string h = HtmlReport(r, r.run.dir + "/report.html");
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  // Offline: no external scripts, styles, fonts or images.
  EXPECT_EQ(h.find("<script src"), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("@import"), std::string::npos);
  EXPECT_EQ(h.find("url("), std::string::npos);
  EXPECT_EQ(h.find("<img"), std::string::npos);
  // The sources' "</script>" never reaches the page raw: exactly the three
  // script blocks close.
  EXPECT_EQ(Count(h, "</script>"), 3u);
  EXPECT_EQ(h.find("<script>alert"), std::string::npos);
  // Sections and plots.
  for (const char* id : {"id='tasks-table'", "id='chart-dist'", "id='chart-fastp'", "id='chart-scaling'",
                         "id='report-data'", "id='panel'", "class='tree'", "id='cost'"})
    EXPECT_NE(h.find(id), std::string::npos) << id;
  // Three trees, one node per candidate, the best one marked.
  EXPECT_EQ(Count(h, "<svg class='tree'"), 3u);
  EXPECT_EQ(Count(h, "<g class='node"), 4u + 3u + 2u);
  EXPECT_EQ(Count(h, "<g class='node best'"), 2u);  // alpha's node 3 and gamma's node 1
  // The best.py link is relative to the page.
  EXPECT_NE(h.find("href='alpha/best.py'"), std::string::npos);
  // The error text with <, & and quotes is escaped where it appears in HTML.
  EXPECT_EQ(h.find("something <bad>"), std::string::npos);
  // The degenerate task is stated.
  EXPECT_NE(h.find("excluded in the second set"), std::string::npos);
}

TEST(Html, DataBlockRoundTrips) {
  Report r = Bench();
  std::string h = HtmlReport(r, "/elsewhere/report.html");
  const std::string open = "<script type='application/json' id='report-data'>";
  size_t a = h.find(open);
  ASSERT_NE(a, std::string::npos);
  a += open.size();
  size_t b = h.find("</script>", a);
  json d = json::parse(h.substr(a, b - a));
  ASSERT_EQ(d["tasks"].size(), 3u);
  const json& alpha = d["tasks"][0];
  EXPECT_EQ(alpha["nodes"][3]["src"], testing::Src("a3"));
  EXPECT_EQ(alpha["nodes"][3]["calls"], json::array({2, 3, 4}));
  EXPECT_EQ(alpha["calls"][2]["prompt"], "PROMPT-A3 revise");
  EXPECT_EQ(d["systems"].size(), 1u);  // the system prompt is stored once
  // From another folder, the link climbs to the run.
  EXPECT_NE(alpha["best_href"].get<std::string>().find("alpha/best.py"), std::string::npos);
}

TEST(Html, EmptyRunRenders) {
  auto d = TempDir("emptyhtml");
  std::unique_ptr<search::RunStore> s;
  ASSERT_TRUE(search::RunStore::Open((d / "run.sqlite").string(), &s).ok());
  s.reset();
  RunData r;
  ASSERT_TRUE(LoadRun(d.string(), &r).ok());
  Report rep = MakeReport(std::move(r));
  std::string h = HtmlReport(rep, (d / "r.html").string());
  EXPECT_NE(h.find("id='tasks-table'"), std::string::npos);
  EXPECT_NE(TextSummary(rep).find("correct 0/0"), std::string::npos);
}

}  // namespace
}  // namespace ax::report
