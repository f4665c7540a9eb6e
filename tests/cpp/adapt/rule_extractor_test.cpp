#include "adapt/rule_extractor.h"

#include <gtest/gtest.h>

#include "adapt/memory.h"
#include "adapt_fakes.h"

namespace ax::adapt {
namespace {

using testing::FuncLlm;

const char* kKernel =
    "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n"
    "    v = tl.float32(tl.load(x_ptr))\n";

FailedCandidate Failure(const std::string& status, const std::string& error) {
  return {"level1/19_ReLU", kKernel, status, error};
}

std::unique_ptr<RuleExtractor> Make(llm::LlmClient* llm, ExtractorOptions o = {}) {
  std::unique_ptr<RuleExtractor> x;
  Status s = RuleExtractor::Create(llm, o, &x);
  EXPECT_TRUE(s.ok()) << s.message();
  return x;
}

TEST(RuleExtractorParse, FindsTheRuleLine) {
  struct Case {
    const char* reply;
    ExtractOutcome outcome;
    const char* rule;
  } cases[] = {
      {"You cannot call tl.float32 as a function.", ExtractOutcome::kRule, "You cannot call tl.float32 as a function."},
      {"- **You cannot call tl.float32 as a function.**", ExtractOutcome::kRule,
       "You cannot call tl.float32 as a function."},
      {"Rule: \"You cannot call tl.float32 as a function.\"", ExtractOutcome::kRule,
       "You cannot call tl.float32 as a function."},
      {"Here is the rule:\n\n1. you cannot  call tl.float32\tas a function", ExtractOutcome::kRule,
       "You cannot call tl.float32 as a function"},
      {"\xE2\x80\x9CYou cannot use tl.dot on int8 inputs.\xE2\x80\x9D", ExtractOutcome::kRule,
       "You cannot use tl.dot on int8 inputs."},
      {"<think>You cannot think here</think>\n> You cannot pass a list to tl.load.", ExtractOutcome::kRule,
       "You cannot pass a list to tl.load."},
      {"No guidance.", ExtractOutcome::kNoGuidance, ""},
      {"`no guidance`", ExtractOutcome::kNoGuidance, ""},
      {"Sorry, the error is unclear.", ExtractOutcome::kUnparsed, ""},
      {"", ExtractOutcome::kUnparsed, ""},
      {"You cannot", ExtractOutcome::kUnparsed, ""},
  };
  for (const auto& c : cases) {
    std::string rule;
    EXPECT_EQ(RuleExtractor::ParseReply(c.reply, 400, &rule), c.outcome) << c.reply;
    EXPECT_EQ(rule, c.rule) << c.reply;
  }
  std::string rule;
  EXPECT_EQ(RuleExtractor::ParseReply("You cannot " + std::string(500, 'x'), 400, &rule), ExtractOutcome::kUnparsed);
}

TEST(RuleExtractorFilter, InfrastructureErrors) {
  for (const char* e : {"judge worker (python3) did not start: exec failed",
                        "reference worker failed: killed",
                        "Traceback:\n  File \"/opt/adaexplore_worker/candidate.py\", line 3\nKeyError: 'x'",
                        "OSError: [Errno 28] No space left on device",
                        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
                        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                        "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>",
                        "the judge could not create a scratch folder under /dev/shm"}) {
    std::string why;
    EXPECT_TRUE(RuleExtractor::IsInfrastructureError(e, &why)) << e;
    EXPECT_FALSE(why.empty());
  }
  for (const char* e : {"TypeError: 'dtype' object is not callable",
                        "error: identifier \"__half2\" is undefined",
                        "triton.compiler.errors.CompilationError: at 4:8: arange's arguments must be of type tl.constexpr"}) {
    EXPECT_FALSE(RuleExtractor::IsInfrastructureError(e)) << e;
  }
}

TEST(RuleExtractor, OneCallTurnsAFailureIntoARule) {
  FuncLlm llm([](const llm::ChatRequest&, std::string*) {
    return std::string("You cannot call tl.float32(...) as a function inside a @triton.jit kernel.");
  });
  auto x = Make(&llm);
  Extraction e = x->Extract(Failure("runtime_error", "TypeError: 'dtype' object is not callable"));
  ASSERT_EQ(e.outcome, ExtractOutcome::kRule) << e.reason;
  EXPECT_EQ(e.rule, "You cannot call tl.float32(...) as a function inside a @triton.jit kernel.");
  ASSERT_EQ(llm.calls(), 1);
  const auto req = llm.requests()[0];
  EXPECT_EQ(req.purpose, "rule_extractor");
  EXPECT_EQ(req.task, "level1/19_ReLU");
  const std::string prompt = req.messages.at(0).content;
  EXPECT_NE(prompt.find("runtime_error"), std::string::npos);
  EXPECT_NE(prompt.find("TypeError: 'dtype' object is not callable"), std::string::npos);
  EXPECT_NE(prompt.find("v = tl.float32(tl.load(x_ptr))"), std::string::npos);
  EXPECT_NE(prompt.find("no guidance"), std::string::npos);
  EXPECT_EQ(x->counts().rules, 1);
}

TEST(RuleExtractor, OnlyTheCandidatesOwnMistakes) {
  FuncLlm llm([](const llm::ChatRequest&, std::string*) { return std::string("You cannot do X."); });
  auto x = Make(&llm);
  for (const char* st : {"timeout", "crashed", "rejected", "ok", "mismatch", "duplicate", "no_candidate"}) {
    Extraction e = x->Extract(Failure(st, "something went wrong"));
    EXPECT_EQ(e.outcome, ExtractOutcome::kSkippedStatus) << st;
    EXPECT_FALSE(e.reason.empty());
  }
  EXPECT_EQ(x->Extract(Failure("compile_error", "judge worker (python3) did not start")).outcome,
            ExtractOutcome::kSkippedInfra);
  EXPECT_EQ(x->Extract(Failure("runtime_error", "   ")).outcome, ExtractOutcome::kSkippedStatus);
  EXPECT_EQ(llm.calls(), 0);
  EXPECT_EQ(x->counts().skipped_status, 8);
  EXPECT_EQ(x->counts().skipped_infra, 1);

  ExtractorOptions o;
  o.include_mismatch = true;
  auto withm = Make(&llm, o);
  EXPECT_EQ(withm->Extract(Failure("mismatch", "max abs error 3.2 at index 7")).outcome, ExtractOutcome::kRule);
  EXPECT_EQ(llm.calls(), 1);
}

TEST(RuleExtractor, LlmErrorsAndOddRepliesGiveNoRule) {
  int n = 0;
  FuncLlm llm([&](const llm::ChatRequest&, std::string* err) -> std::string {
    switch (n++) {
      case 0: *err = "fake: HTTP 429 rate limited after 6 attempts"; return "";
      case 1: return "no guidance";
      default: return "The kernel should use tl.cast instead.";
    }
  });
  auto x = Make(&llm);
  Extraction a = x->Extract(Failure("compile_error", "SyntaxError: invalid syntax"));
  EXPECT_EQ(a.outcome, ExtractOutcome::kLlmError);
  EXPECT_TRUE(a.rule.empty());
  EXPECT_NE(a.reason.find("HTTP 429"), std::string::npos);
  EXPECT_EQ(x->Extract(Failure("compile_error", "SyntaxError: invalid syntax")).outcome, ExtractOutcome::kNoGuidance);
  Extraction c = x->Extract(Failure("compile_error", "SyntaxError: invalid syntax"));
  EXPECT_EQ(c.outcome, ExtractOutcome::kUnparsed);
  EXPECT_NE(c.reason.find("tl.cast"), std::string::npos);
  auto k = x->counts();
  EXPECT_EQ(k.calls, 3);
  EXPECT_EQ(k.llm_errors, 1);
  EXPECT_EQ(k.no_guidance, 1);
  EXPECT_EQ(k.unparsed, 1);
  EXPECT_EQ(k.rules, 0);
}

TEST(RuleExtractor, LongInputsAreCut) {
  FuncLlm llm([](const llm::ChatRequest&, std::string*) { return std::string("no guidance"); });
  ExtractorOptions o;
  o.max_error_chars = 300;
  o.max_source_chars = 400;
  auto x = Make(&llm, o);
  FailedCandidate f = Failure("runtime_error", std::string(5000, 'e') + "\nValueError: the last line matters");
  f.source = std::string(10000, 's');
  x->Extract(f);
  const std::string prompt = llm.requests().at(0).messages.at(0).content;
  EXPECT_LT(prompt.size(), 3000u);
  EXPECT_NE(prompt.find("ValueError: the last line matters"), std::string::npos);
  EXPECT_NE(prompt.find("characters cut"), std::string::npos);
}

TEST(RuleExtractor, CreateNeedsTheTemplateAndAnLlm) {
  FuncLlm llm([](const llm::ChatRequest&, std::string*) { return std::string(); });
  std::unique_ptr<RuleExtractor> x;
  ExtractorOptions o;
  o.prompts_dir = "/nonexistent-prompts";
  Status s = RuleExtractor::Create(&llm, o, &x);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rule_extractor.txt"), std::string::npos);
  EXPECT_FALSE(RuleExtractor::Create(nullptr, {}, &x).ok());
}

// Extraction feeding the memory: the same mistake in three tasks is one rule
// scoring three, which prompts then carry.
TEST(RuleExtractor, RepeatedMistakeBecomesAnInjectedRule) {
  FuncLlm llm([](const llm::ChatRequest& req, std::string*) -> std::string {
    if (req.purpose == "rule_extractor") return "- You cannot call `tl.float32(x)` as a function.";
    return "0";
  });
  auto x = Make(&llm);
  Memory m;
  ASSERT_TRUE(m.SetLlm(&llm).ok());
  for (int i = 0; i < 3; ++i) {
    FailedCandidate f = Failure("runtime_error", "TypeError: 'dtype' object is not callable");
    f.task = "task" + std::to_string(i);
    Extraction e = x->Extract(f);
    ASSERT_EQ(e.outcome, ExtractOutcome::kRule);
    m.Add(e.rule, {f.task, f.error, 0});
  }
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m.Rules()[0].score, 3);
  EXPECT_EQ(m.Select(), std::vector<std::string>{"You cannot call `tl.float32(x)` as a function."});
}

}  // namespace
}  // namespace ax::adapt
