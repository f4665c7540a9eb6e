#include "adapt/memory.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "adapt_fakes.h"
#include "common/util.h"
#include "search/skill_rules.h"

namespace ax::adapt {
namespace {

using testing::FinishesWithin;
using testing::FuncLlm;
using testing::ParseDedupPrompt;

const std::string kRefMemory =
    std::string(ADAEXPLORE_SOURCE_DIR) + "/../shared/datasets/adaexplore-memory/general_memory_v1_200.txt";

class TempDir {
 public:
  TempDir() : path_(MakeTempDir("/tmp", "adapt-memory-test")) {}
  ~TempDir() { RemoveTree(path_); }
  std::string operator/(const std::string& f) const { return path_ + "/" + f; }

 private:
  std::string path_;
};

MemoryOptions FixedClock(int64_t t = 1767000000) {
  MemoryOptions o;
  o.now = [t] { return t; };
  return o;
}

// ---- formats ----

TEST(MemoryFormat, TextRoundTrip) {
  Memory m;
  ASSERT_TRUE(m.FromText("You cannot do A.||34.0\n\n# a comment\nYou cannot do B || C.||2.5\nYou cannot do D.||1\n").ok());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.ToText(), "You cannot do A.||34.0\nYou cannot do B || C.||2.5\nYou cannot do D.||1.0\n");
  Memory back;
  ASSERT_TRUE(back.FromText(m.ToText()).ok());
  EXPECT_EQ(back.ToText(), m.ToText());
  EXPECT_DOUBLE_EQ(back.total_score(), 37.5);
}

TEST(MemoryFormat, TextErrorsNameTheLine) {
  Memory m;
  Status s = m.FromText("You cannot do A.||3\nno score here\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  s = m.FromText("You cannot do A.||three\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a number"), std::string::npos);
  EXPECT_FALSE(m.FromText("||3\n").ok());
  EXPECT_FALSE(m.FromText("You cannot x||inf\n").ok());
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

TEST(MemoryFormat, JsonRoundTripKeepsEveryField) {
  Memory m(FixedClock(100));
  m.Add("You cannot call tl.float32 as a function.", {"task_a", "TypeError: 'dtype' object is not callable", 0});
  m.Add("You cannot call tl.float32 as a function.", {"task_b", "TypeError again", 200});
  m.Add("You cannot use tl.arange with a non-constexpr bound.", {"task_c", "", 0});
  nlohmann::json j = m.ToJson();
  EXPECT_EQ(j["format"], "adaexplore-memory");
  EXPECT_EQ(j["version"], 1);

  Memory back;
  ASSERT_TRUE(back.FromJson(j.dump()).ok());
  auto rules = back.Rules();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].text, "You cannot call tl.float32 as a function.");
  EXPECT_EQ(rules[0].score, 2);
  EXPECT_EQ(rules[0].first_seen, 100);
  EXPECT_EQ(rules[0].last_seen, 200);
  ASSERT_EQ(rules[0].examples.size(), 2u);
  EXPECT_EQ(rules[0].examples[0].task, "task_a");
  EXPECT_EQ(rules[0].examples[1].task, "task_b");
  EXPECT_EQ(rules[0].examples[1].time, 200);
  EXPECT_EQ(rules[1].examples[0].task, "task_c");
  EXPECT_EQ(back.ToJson(), j);
}

TEST(MemoryFormat, JsonErrorsAreOneLine) {
  Memory m;
  for (const char* bad : {"{", "{\"rules\": 3}", "{\"rules\": [{\"score\": 1}]}", "{\"rules\": [{\"rule\": \"x\"}]}",
                          "{\"rules\": [{\"rule\": \"x\", \"score\": \"high\"}]}",
                          "{\"rules\": [{\"rule\": \"x\", \"score\": 1, \"examples\": [3]}]}"}) {
    Status s = m.FromJson(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
  ASSERT_TRUE(m.FromJson("{\"rules\": [{\"rule\": \"You cannot x\", \"score\": 4}]}").ok());
  EXPECT_EQ(m.Rules()[0].first_seen, 0);
}

TEST(MemoryFormat, LoadMergesNormalisedDuplicates) {
  Memory m;
  ASSERT_TRUE(m.FromText("You cannot call `tl.exp` on ints.||3\nyou cannot call tl.exp on ints||2\n").ok());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m.Rules()[0].score, 5);
}

TEST(MemoryFormat, SaveAndLoadByExtension) {
  TempDir d;
  Memory m(FixedClock());
  m.Add("You cannot call tl.float32 as a function.", {"t", "err", 0});
  m.Add("You cannot call tl.float32 as a function.", {"t2", "err2", 0});
  ASSERT_TRUE(m.Save(d / "m.txt").ok());
  ASSERT_TRUE(m.Save(d / "m.json").ok());
  EXPECT_EQ(*ReadFile(d / "m.txt"), "You cannot call tl.float32 as a function.||2.0\n");

  Memory t, j;
  ASSERT_TRUE(t.Load(d / "m.txt").ok());
  ASSERT_TRUE(j.Load(d / "m.json").ok());
  EXPECT_EQ(t.Rules()[0].score, 2);
  EXPECT_TRUE(t.Rules()[0].examples.empty());  // the text format has no examples
  EXPECT_EQ(j.Rules()[0].examples.size(), 2u);

  // Another extension is sniffed on reading and refused on writing.
  ASSERT_TRUE(m.Save(d / "m.json").ok());
  std::filesystem::copy_file(d / "m.json", d / "m.mem");
  Memory s;
  ASSERT_TRUE(s.Load(d / "m.mem").ok());
  EXPECT_EQ(s.size(), 1u);
  Status bad = m.Save(d / "m.mem");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(".txt"), std::string::npos);

  Memory missing;
  EXPECT_FALSE(missing.Load(d / "none.txt").ok());
  EXPECT_TRUE(missing.Load(d / "none.txt", /*missing_ok=*/true).ok());
  EXPECT_EQ(missing.size(), 0u);
}

TEST(MemoryFormat, FailedSaveLosesNothing) {
  TempDir d;
  ASSERT_TRUE(WriteFile(d / "file", "x"));
  Memory m;
  m.Add("You cannot do A.");
  ASSERT_TRUE(m.Save(d / "ok.txt").ok());
  // A path under a regular file cannot be written, whoever runs the test.
  Status s = m.Save(d / "file/m.txt");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write memory file"), std::string::npos);
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  EXPECT_EQ(m.size(), 1u);
  m.Add("You cannot do B.");
  ASSERT_TRUE(m.Save(d / "ok.txt").ok());
  EXPECT_EQ(*ReadFile(d / "ok.txt"), "You cannot do A.||1.0\nYou cannot do B.||1.0\n");
  // No temporary files are left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(d / "")) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 2);
}

TEST(MemoryFormat, SaveIfChangedWritesOnlyChanges) {
  TempDir d;
  Memory m;
  m.Add("You cannot do A.");
  ASSERT_TRUE(m.SaveIfChanged(d / "m.txt").ok());
  std::filesystem::remove(d / "m.txt");
  ASSERT_TRUE(m.SaveIfChanged(d / "m.txt").ok());
  EXPECT_FALSE(std::filesystem::exists(d / "m.txt"));  // nothing changed: not written
  m.Add("You cannot do A.");
  ASSERT_TRUE(m.SaveIfChanged(d / "m.txt").ok());
  EXPECT_EQ(*ReadFile(d / "m.txt"), "You cannot do A.||2.0\n");
}

TEST(MemoryFormat, ImportsTheReferenceMemory) {
  if (!std::filesystem::exists(kRefMemory)) GTEST_SKIP() << "reference memory not present: " << kRefMemory;
  std::vector<search::ScoredRule> raw;
  ASSERT_TRUE(search::LoadRulesFile(kRefMemory, &raw).ok());
  double sum = 0;
  for (auto& r : raw) sum += r.score;

  Memory m;
  ASSERT_TRUE(m.Load(kRefMemory).ok());
  EXPECT_GT(m.size(), 100u);
  EXPECT_LE(m.size(), raw.size());
  EXPECT_DOUBLE_EQ(m.total_score(), sum);  // merged duplicates keep their counts
  auto first = m.Find(raw[0].text);
  ASSERT_TRUE(first.has_value());
  EXPECT_GE(first->score, raw[0].score);

  // Text -> JSON -> text keeps every rule and score.
  TempDir d;
  ASSERT_TRUE(m.Save(d / "ref.json").ok());
  Memory j;
  ASSERT_TRUE(j.Load(d / "ref.json").ok());
  EXPECT_EQ(j.ToText(), m.ToText());

  auto picked = m.Select();
  ASSERT_FALSE(picked.empty());
  if (m.size() == raw.size()) {
    EXPECT_EQ(picked, search::SelectRules(raw));  // no duplicates merged: the same choice
  }
  size_t chars = 0;
  for (auto& r : picked) {
    chars += r.size() + 3;
    EXPECT_GE(m.Find(r)->score, 3);
  }
  EXPECT_LE(chars, 4000u);
}

// ---- selection ----

TEST(MemorySelect, ThresholdOrderAndBudget) {
  Memory m;
  ASSERT_TRUE(m.FromText("You cannot a.||2\nYou cannot b.||5\nYou cannot c.||3\nYou cannot d.||9\n").ok());
  EXPECT_EQ(m.Select(), (std::vector<std::string>{"You cannot d.", "You cannot b.", "You cannot c."}));
  EXPECT_EQ(m.Select(6), (std::vector<std::string>{"You cannot d."}));
  EXPECT_EQ(m.Select(3, 32), (std::vector<std::string>{"You cannot d.", "You cannot b."}));
}

TEST(MemoryPrune, MinScoreAndMaxRules) {
  Memory m;
  ASSERT_TRUE(m.FromText("You cannot a.||2\nYou cannot b.||5\nYou cannot c.||3\nYou cannot d.||9\n").ok());
  EXPECT_EQ(m.Prune(3), 1u);
  EXPECT_EQ(m.Prune(-1, 2), 1u);
  EXPECT_EQ(m.ToText(), "You cannot b.||5.0\nYou cannot d.||9.0\n");
  // Indices are rebuilt: adding a pruned rule again makes it new.
  EXPECT_EQ(m.Add("You cannot c.").match, Match::kNew);
  EXPECT_EQ(m.Add("You cannot b.").match, Match::kExact);
}

// ---- deduplication ----

TEST(MemoryDedup, ExactAndNormalisedMatches) {
  Memory m(FixedClock());
  AddResult a = m.Add("You cannot call tl.float32(x) as a function.", {"t1", "TypeError: x", 0});
  EXPECT_EQ(a.match, Match::kNew);
  EXPECT_EQ(a.score, 1);
  AddResult b = m.Add("  You cannot call tl.float32(x) as a function.\n");
  EXPECT_EQ(b.match, Match::kExact);
  AddResult c = m.Add("you cannot call \u201ctl.float32(x)\u201d as a FUNCTION");
  EXPECT_EQ(c.match, Match::kNormalized);
  AddResult d = m.Add("You cannot call `tl.float32 (x)` as a function!!");
  EXPECT_EQ(d.match, Match::kNormalized);
  EXPECT_EQ(d.score, 4);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(Memory::Normalize("You can't  use `tl.dot` -- on \"int8\"."), "you cant use tl dot on int8");
  EXPECT_FALSE(m.Add("   \n ").status.ok());
}

TEST(MemoryDedup, SameMistakeThreeTimesIsOneRuleScoringThree) {
  Memory m(FixedClock());
  for (int i = 0; i < 3; ++i) {
    m.Add("You cannot pass a Python list to tl.load.", {"task" + std::to_string(i), "error " + std::to_string(i), 0});
  }
  ASSERT_EQ(m.size(), 1u);
  Rule r = m.Rules()[0];
  EXPECT_EQ(r.score, 3);
  EXPECT_EQ(r.examples.size(), 3u);
  EXPECT_EQ(m.Select(), std::vector<std::string>{"You cannot pass a Python list to tl.load."});
}

TEST(MemoryDedup, KeepsTheNewestFewExamplesAsExcerpts) {
  MemoryOptions o = FixedClock();
  o.max_examples = 2;
  o.max_error_chars = 60;
  Memory m(o);
  std::string long_error = "Traceback (most recent call last):\n" + std::string(200, 'x') +
                           "\n  File \"k.py\", line 3\nTypeError: 'dtype' object is not callable";
  for (int i = 0; i < 4; ++i) m.Add("You cannot do A.", {"t" + std::to_string(i), long_error, 0});
  Rule r = m.Rules()[0];
  ASSERT_EQ(r.examples.size(), 2u);
  EXPECT_EQ(r.examples[0].task, "t2");
  EXPECT_EQ(r.examples[1].task, "t3");
  EXPECT_LE(r.examples[1].error.size(), 60u);
  EXPECT_NE(r.examples[1].error.find("TypeError: 'dtype' object is not callable"), std::string::npos);
}

// The LLM answers with the number of the candidate that shares the new
// rule's topic word (fooN), or 0.
FuncLlm::Fn TopicJudge(std::atomic<size_t>* max_shown = nullptr) {
  return [max_shown](const llm::ChatRequest& req, std::string*) -> std::string {
    auto p = ParseDedupPrompt(req.messages.at(0).content);
    if (max_shown) {
      size_t cur = *max_shown;
      while (p.candidates.size() > cur && !max_shown->compare_exchange_weak(cur, p.candidates.size())) {
      }
    }
    std::smatch m;
    static const std::regex topic(R"((foo\d+|PADDING_LEFT))");
    if (!std::regex_search(p.rule, m, topic)) return "0";
    for (size_t i = 0; i < p.candidates.size(); ++i) {
      std::smatch c;
      if (std::regex_search(p.candidates[i], c, topic) && c[1] == m[1]) return std::to_string(i + 1);
    }
    return "0";
  };
}

TEST(MemoryDedup, LlmDecidesOverTheShortlistOnly) {
  Memory m(FixedClock());
  for (int i = 0; i < 50; ++i) {
    m.Add("You cannot call tl.foo" + std::to_string(i) + " inside a Triton kernel.");
  }
  FuncLlm llm(TopicJudge());
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  AddResult r = m.Add("You cannot invoke tl.foo17 from within a Triton kernel.", {"t", "e", 0});
  EXPECT_EQ(r.match, Match::kLlm);
  EXPECT_EQ(r.rule, "You cannot call tl.foo17 inside a Triton kernel.");
  EXPECT_EQ(r.score, 2);
  EXPECT_EQ(m.size(), 50u);
  ASSERT_EQ(llm.calls(), 1);
  auto p = ParseDedupPrompt(llm.requests()[0].messages[0].content);
  EXPECT_EQ(p.rule, "You cannot invoke tl.foo17 from within a Triton kernel.");
  EXPECT_GE(p.candidates.size(), 1u);
  EXPECT_LE(p.candidates.size(), 8u);
  EXPECT_EQ(p.candidates[0], "You cannot call tl.foo17 inside a Triton kernel.");  // the most similar first
  EXPECT_EQ(llm.requests()[0].purpose, "rule_dedup");

  // Unrelated rules reach no LLM at all.
  AddResult u = m.Add("You cannot launch a grid with zero programs.");
  EXPECT_EQ(u.match, Match::kNew);
  EXPECT_EQ(llm.calls(), 1);

  // The LLM says none: a new rule.
  AddResult n = m.Add("You cannot invoke tl.foo99 from within a Triton kernel.");
  EXPECT_EQ(n.match, Match::kNew);
  EXPECT_EQ(n.score, 1);
  EXPECT_EQ(m.size(), 52u);
}

TEST(MemoryDedup, ReferenceMemoryShortlistIsSmall) {
  if (!std::filesystem::exists(kRefMemory)) GTEST_SKIP() << "reference memory not present: " << kRefMemory;
  Memory m;
  ASSERT_TRUE(m.Load(kRefMemory).ok());
  auto before = m.Find("You cannot reference the name PADDING_LEFT when it is not defined.");
  ASSERT_TRUE(before.has_value());
  FuncLlm llm(TopicJudge());
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  AddResult r = m.Add("You cannot use the name PADDING_LEFT before defining it.");
  EXPECT_EQ(r.match, Match::kLlm);
  EXPECT_EQ(r.score, before->score + 1);
  ASSERT_EQ(llm.calls(), 1);
  const std::string prompt = llm.requests()[0].messages[0].content;
  size_t shown = 0;
  for (const auto& rule : m.Rules()) shown += prompt.find(rule.text) != std::string::npos ? 1 : 0;
  EXPECT_GE(shown, 1u);
  EXPECT_LE(shown, 8u);  // never the whole memory
}

TEST(MemoryDedup, ShortlistStaysBoundedInALargeMemory) {
  MemoryOptions o;
  o.max_candidates = 500;
  Memory m(o);
  for (int i = 0; i < 20000; ++i) {
    m.Add("You cannot call tl.op" + std::to_string(i) + " with argument arg" + std::to_string(i % 50) + " in a kernel.");
  }
  ASSERT_EQ(m.size(), 20000u);
  std::atomic<size_t> max_shown{0};
  FuncLlm llm(TopicJudge(&max_shown));
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) m.Add("You cannot pass argument arg7 to tl.op" + std::to_string(i * 37) + " inside kernels.");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(max_shown.load(), 8u);
  EXPECT_GE(llm.calls(), 90);  // nearly every add has similar rules
  EXPECT_LT(ms / 100, 50.0) << "per add";  // candidate scoring is capped, not a scan of the memory
  auto sl = m.Shortlist("You cannot call tl.op123 with argument arg23 in a kernel!");
  ASSERT_FALSE(sl.empty());
  EXPECT_EQ(sl[0].first, "You cannot call tl.op123 with argument arg23 in a kernel.");
}

TEST(MemoryDedup, LlmFailureKeepsTheRuleAsNew) {
  Memory m;
  m.Add("You cannot call tl.foo1 inside a Triton kernel.");
  FuncLlm llm([](const llm::ChatRequest&, std::string* err) {
    *err = "fake: HTTP 500";
    return std::string();
  });
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  AddResult r = m.Add("You cannot invoke tl.foo1 inside a Triton kernel.");
  EXPECT_EQ(r.match, Match::kNew);
  EXPECT_NE(r.llm_error.find("HTTP 500"), std::string::npos);
  EXPECT_EQ(llm.calls(), 1);  // no second round after a failure
  EXPECT_EQ(m.size(), 2u);

  FuncLlm vague([](const llm::ChatRequest&, std::string*) { return std::string("They look related, maybe."); });
  ASSERT_TRUE(m.SetLlm(&vague).ok());
  AddResult v = m.Add("You cannot use tl.foo1 in a Triton kernel body.");
  EXPECT_EQ(v.match, Match::kNew);
  EXPECT_NE(v.llm_error.find("names no rule"), std::string::npos);
}

TEST(MemoryDedup, RuleAddedWhileTheLlmThinksIsFound) {
  Memory m;
  m.Add("You cannot call tl.foo1 inside a Triton kernel.");
  std::atomic<int> calls{0};
  FuncLlm llm([&](const llm::ChatRequest& req, std::string*) -> std::string {
    if (calls++ == 0) {
      // Another task adds the same rule, worded a little differently, meanwhile.
      AddResult inner = m.Add("you cannot invoke TL.FOO2 inside a triton kernel!");
      EXPECT_EQ(inner.match, Match::kNew);
    }
    return "0";
  });
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  AddResult r = m.Add("You cannot invoke tl.foo2 inside a Triton kernel.");
  EXPECT_EQ(r.match, Match::kNormalized);
  EXPECT_EQ(r.score, 2);
  EXPECT_EQ(m.size(), 2u);
}

TEST(MemoryDedup, RuleAddedMeanwhileGetsANewRound) {
  Memory m;
  m.Add("You cannot call tl.foo1 inside a Triton kernel.");
  bool first = true;
  std::vector<std::vector<std::string>> seen;
  FuncLlm llm([&](const llm::ChatRequest& req, std::string*) -> std::string {
    auto p = ParseDedupPrompt(req.messages[0].content);
    if (p.rule.find("invoke tl.foo2") == std::string::npos) return "0";  // the inner add
    seen.push_back(p.candidates);
    if (first) {
      first = false;
      m.Add("You cannot call tl.foo2 inside any Triton kernel.");  // not a normalised match
      return "0";
    }
    for (size_t i = 0; i < p.candidates.size(); ++i) {
      if (p.candidates[i].find("foo2") != std::string::npos) return std::to_string(i + 1);
    }
    return "0";
  });
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  AddResult r = m.Add("You cannot invoke tl.foo2 inside a Triton kernel.");
  EXPECT_EQ(r.match, Match::kLlm);
  EXPECT_EQ(r.rule, "You cannot call tl.foo2 inside any Triton kernel.");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], std::vector<std::string>{"You cannot call tl.foo2 inside any Triton kernel."});  // only the new one
  EXPECT_EQ(m.size(), 2u);
}

TEST(MemoryDedup, MatchPrunedMeanwhileMakesANewRule) {
  Memory m;
  m.Add("You cannot call tl.foo1 inside a Triton kernel.");
  FuncLlm llm([&](const llm::ChatRequest&, std::string*) -> std::string {
    m.Prune(5);  // removes the rule the LLM is about to name
    return "1";
  });
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  AddResult r = m.Add("You cannot invoke tl.foo1 inside a Triton kernel.");
  EXPECT_EQ(r.match, Match::kNew);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.Rules()[0].text, "You cannot invoke tl.foo1 inside a Triton kernel.");
}

TEST(MemoryDedup, SetLlmNeedsTheTemplate) {
  Memory m;
  FuncLlm llm(TopicJudge());
  Status s = m.SetLlm(&llm, "/nonexistent-prompts");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rule_dedup.txt"), std::string::npos);
}

// ---- concurrency ----

TEST(MemoryConcurrency, ManyTasksLoseNoUpdateAndHoldNoLockAcrossTheLlm) {
  Memory m;
  std::atomic<int> lock_held_during_llm{0};
  std::atomic<int> llm_calls{0};
  auto judge = TopicJudge();
  FuncLlm llm([&](const llm::ChatRequest& req, std::string* err) {
    ++llm_calls;
    // The memory must be usable by others while this task waits on the LLM.
    if (!FinishesWithin([&] { (void)m.size(); (void)m.Select(); }, 5000)) ++lock_held_during_llm;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return judge(req, err);
  });
  ASSERT_TRUE(m.SetLlm(&llm).ok());

  // Fewer topics than the shortlist holds, so that lexical ranking cannot
  // hide a match: this test is about concurrency (recall is tested above).
  const int kTasks = 16, kUpdates = 20, kTopics = 8;
  auto phrase = [](int topic, int variant) {
    std::string t = "foo" + std::to_string(topic);
    switch (variant) {
      case 0: return "You cannot call tl." + t + " inside a Triton kernel.";
      case 1: return "you cannot call TL." + t + " inside a triton kernel";   // normalised match
      case 2: return "You cannot invoke tl." + t + " inside a Triton kernel.";  // needs the LLM
      default: return "You cannot use tl." + t + " within a Triton kernel function.";
    }
  };
  std::vector<std::thread> threads;
  std::atomic<int> adds{0};
  for (int t = 0; t < kTasks; ++t) {
    threads.emplace_back([&, t] {
      for (int u = 0; u < kUpdates; ++u) {
        AddResult r = m.Add(phrase((t + u) % kTopics, (t * 7 + u) % 4), {"task" + std::to_string(t), "err", 0});
        if (r.status.ok()) ++adds;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(adds.load(), kTasks * kUpdates);
  EXPECT_DOUBLE_EQ(m.total_score(), kTasks * kUpdates);  // no update lost
  EXPECT_EQ(m.size(), static_cast<size_t>(kTopics));    // one rule per mistake
  EXPECT_GT(llm_calls.load(), 0);
  EXPECT_EQ(lock_held_during_llm.load(), 0);
  for (const auto& r : m.Rules()) EXPECT_EQ(r.score, kTasks * kUpdates / kTopics) << r.text;
}

TEST(MemoryConcurrency, SavesWhileAddingStayReadable) {
  TempDir d;
  Memory m;
  std::atomic<bool> stop{false};
  std::thread saver([&] {
    while (!stop) {
      ASSERT_TRUE(m.SaveIfChanged(d / "m.txt").ok());
      ASSERT_TRUE(m.SaveIfChanged(d / "m.json").ok());
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int u = 0; u < 50; ++u) m.Add("You cannot do thing " + std::to_string((t + u) % 7) + ".");
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  saver.join();
  ASSERT_TRUE(m.SaveIfChanged(d / "m.txt").ok());
  Memory back;
  ASSERT_TRUE(back.Load(d / "m.txt").ok());
  EXPECT_EQ(back.total_score(), 400);
  EXPECT_EQ(back.size(), 7u);
}

}  // namespace
}  // namespace ax::adapt
