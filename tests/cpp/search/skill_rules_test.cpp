// Tests of the skill-memory rules for prompts: the reference's `rule||score`
// format (including the real memory file, when the shared data set is there)
// and the selection of rules by threshold, order and size budget.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/util.h"
#include "search/skill_rules.h"

namespace ax::search {
namespace {

std::vector<ScoredRule> Parse(const std::string& text) {
  std::vector<ScoredRule> out;
  Status s = ParseRuleLines(text, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

Status ParseError(const std::string& text) {
  std::vector<ScoredRule> out;
  return ParseRuleLines(text, &out);
}

TEST(ParseRuleLines, ReadsRulesAndScores) {
  auto r = Parse("You cannot call tl.float32 as a function.||138.0\nUse masks.||2\n");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].text, "You cannot call tl.float32 as a function.");
  EXPECT_DOUBLE_EQ(r[0].score, 138.0);
  EXPECT_EQ(r[1].text, "Use masks.");
  EXPECT_DOUBLE_EQ(r[1].score, 2.0);
}

TEST(ParseRuleLines, SkipsBlankAndCommentLinesAndTrims) {
  auto r = Parse("# a comment||1\n\n   \n  rule one  ||  3.5  \r\n\t# another\nrule two||-1e1");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].text, "rule one");
  EXPECT_DOUBLE_EQ(r[0].score, 3.5);
  EXPECT_EQ(r[1].text, "rule two");
  EXPECT_DOUBLE_EQ(r[1].score, -10.0);
}

TEST(ParseRuleLines, ASeparatorInsideTheRuleKeepsTheLastOneForTheScore) {
  auto r = Parse("You cannot write `a || b` on tensors; use `a | b`.||4\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].text, "You cannot write `a || b` on tensors; use `a | b`.");
  EXPECT_DOUBLE_EQ(r[0].score, 4.0);
}

TEST(ParseRuleLines, AppendsToWhatIsThere) {
  std::vector<ScoredRule> out = {{"old", 1}};
  ASSERT_TRUE(ParseRuleLines("new||2", &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].text, "new");
}

TEST(ParseRuleLines, BadScoreNamesTheLine) {
  Status s = ParseError("good||1\n\n# comment\nbad one||high\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'high'"), std::string::npos) << s.message();

  s = ParseError("good||1\nrule||3.5x\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();

  s = ParseError("rule||\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 1"), std::string::npos) << s.message();
}

TEST(ParseRuleLines, MissingSeparatorNamesTheLine) {
  Status s = ParseError("a||1\nb||2\nno separator here 3\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rule||score"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

TEST(ParseRuleLines, NonFiniteScoresAreRejected) {
  // src/search/skill_rules.cpp:23-24 take any text strtod accepts, so "nan",
  // "inf" and "0x10" pass as scores. A NaN-scored rule is then silently never
  // selected (NaN >= threshold is false) and an "inf" one always wins.
  EXPECT_FALSE(ParseError("rule||nan\n").ok());
  EXPECT_FALSE(ParseError("rule||inf\n").ok());
}

TEST(LoadRulesFile, MissingFileNamesIt) {
  std::vector<ScoredRule> out;
  Status s = LoadRulesFile("/nonexistent/memory.txt", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/memory.txt"), std::string::npos) << s.message();
}

TEST(LoadRulesFile, BadLineNamesFileAndLine) {
  std::string dir = MakeTempDir(::testing::TempDir(), "axrules");
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/memory.txt";
  ASSERT_TRUE(WriteFile(path, "a||1\nb||two\n"));
  std::vector<ScoredRule> out;
  Status s = LoadRulesFile(path, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  RemoveTree(dir);
}

TEST(LoadRulesFile, TheReferenceMemoryFileParses) {
  const std::string path = ADAEXPLORE_SOURCE_DIR "/../shared/datasets/adaexplore-memory/general_memory_v1_200.txt";
  auto text = ReadFile(path);
  if (!text) GTEST_SKIP() << "no shared memory data set at " << path;
  std::vector<ScoredRule> rules;
  Status s = LoadRulesFile(path, &rules);
  ASSERT_TRUE(s.ok()) << s.message();
  size_t lines = 0;
  for (size_t p = 0; p < text->size();) {
    size_t e = text->find('\n', p);
    if (!Trim(text->substr(p, e == std::string::npos ? std::string::npos : e - p)).empty()) ++lines;
    if (e == std::string::npos) break;
    p = e + 1;
  }
  EXPECT_EQ(rules.size(), lines) << "every non-blank line is a rule";
  for (const auto& r : rules) {
    EXPECT_FALSE(r.text.empty());
    EXPECT_EQ(r.text.find("||"), std::string::npos) << r.text;
    EXPECT_GE(r.score, 0) << r.text;
  }

  std::vector<std::string> sel = SelectRules(rules);
  ASSERT_FALSE(sel.empty());
  size_t chars = 0;
  for (const auto& t : sel) chars += t.size() + 3;
  EXPECT_LE(chars, 4000u);
  // Highest score first, every one at or above the default threshold.
  double prev = 1e300;
  for (const auto& t : sel) {
    double score = -1;
    for (const auto& r : rules)
      if (r.text == t) score = r.score;
    EXPECT_GE(score, 3.0) << t;
    EXPECT_LE(score, prev) << t;
    prev = score;
  }
  EXPECT_EQ(sel[0], "You cannot call tl.float32 as a function inside a Triton kernel.") << "the top-scored rule (138)";
}

TEST(SelectRules, ThresholdIsInclusive) {
  std::vector<ScoredRule> r = {{"low", 2.99}, {"at", 3.0}, {"high", 7}};
  EXPECT_EQ(SelectRules(r), (std::vector<std::string>{"high", "at"}));
  EXPECT_EQ(SelectRules(r, 0), (std::vector<std::string>{"high", "at", "low"}));
  EXPECT_TRUE(SelectRules(r, 100).empty());
}

TEST(SelectRules, HighestFirstTiesKeepFileOrder) {
  std::vector<ScoredRule> r = {{"b4", 4}, {"a9", 9}, {"c4", 4}, {"d9", 9}, {"e5", 5}};
  EXPECT_EQ(SelectRules(r, 0), (std::vector<std::string>{"a9", "d9", "e5", "b4", "c4"}));
}

TEST(SelectRules, EmptyRulesAreDropped) {
  std::vector<ScoredRule> r = {{"", 50}, {"real", 4}};
  EXPECT_EQ(SelectRules(r), (std::vector<std::string>{"real"}));
}

TEST(SelectRules, SizeBudgetCountsTextPlusBulletOverhead) {
  // Each rule costs its length plus 3 ("- " and a newline).
  std::vector<ScoredRule> r = {{std::string(10, 'a'), 9}, {std::string(10, 'b'), 8}, {std::string(10, 'c'), 7}};
  EXPECT_EQ(SelectRules(r, 0, 26).size(), 2u);  // exactly two fit
  EXPECT_EQ(SelectRules(r, 0, 25).size(), 1u);
  EXPECT_EQ(SelectRules(r, 0, 39).size(), 3u);
  EXPECT_TRUE(SelectRules(r, 0, 12).empty());
  EXPECT_TRUE(SelectRules(r, 0, 0).empty());
  // What is kept is always the best-scored prefix.
  EXPECT_EQ(SelectRules(r, 0, 26)[0], std::string(10, 'a'));
}

TEST(SelectRules, ALongRuleDoesNotCrowdOutTheRest) {
  // src/search/skill_rules.cpp:49 stops at the first rule that does not fit,
  // so one over-long, high-scored rule leaves the prompt with no rules at all
  // (or with fewer than fit), where skipping it would keep the next ones.
  std::vector<ScoredRule> r = {{std::string(5000, 'x'), 99}, {"short rule", 5}};
  EXPECT_EQ(SelectRules(r), (std::vector<std::string>{"short rule"}));
}

}  // namespace
}  // namespace ax::search
