// Code extraction from replies, the tuner's edit blocks, and retry policy.
#include <gtest/gtest.h>

#include <random>

#include "llm/edits.h"
#include "llm/extract.h"
#include "llm/retry.h"

namespace ax::llm {
namespace {

TEST(Extract, PrefersTaggedFence) {
  std::string reply =
      "Plan:\n```\nnot code, a plan\n```\nHere it is:\n```python\nimport triton\nx = 1\n```\nand\n```cuda\nother\n```\n";
  Extracted e = ExtractCode(reply);
  EXPECT_EQ(e.how, ExtractHow::kTaggedFence);
  EXPECT_EQ(e.lang, "python");
  EXPECT_EQ(e.code, "import triton\nx = 1\n");
  EXPECT_FALSE(e.unterminated);
}

TEST(Extract, AnyFenceThenWholeText) {
  Extracted e = ExtractCode("text\n~~~~\na = 1\n~~~~\nmore");
  EXPECT_EQ(e.how, ExtractHow::kFence);
  EXPECT_EQ(e.code, "a = 1\n");
  e = ExtractCode("\n  import torch\nclass ModelNew: pass\n\n");
  EXPECT_EQ(e.how, ExtractHow::kWholeText);
  EXPECT_EQ(e.code, "import torch\nclass ModelNew: pass\n");
  EXPECT_EQ(ExtractCode("").code, "");
}

TEST(Extract, NestedShorterFenceAndUnterminatedBlock) {
  // A four-backtick fence holds a three-backtick one.
  Extracted e = ExtractCode("````markdown\n```python\nx\n```\n````\n");
  EXPECT_EQ(e.lang, "markdown");
  EXPECT_EQ(e.code, "```python\nx\n```\n");
  e = ExtractCode("```python {.x}\r\ndef f():\r\n    return 1\r\n");  // cut off by a length stop
  EXPECT_EQ(e.lang, "python");
  EXPECT_TRUE(e.unterminated);
  EXPECT_EQ(e.code, "def f():\n    return 1\n");
  // Inline code with backticks on one line is not a fence.
  e = ExtractCode("use ```x``` here\n```py\ny\n```");
  EXPECT_EQ(e.code, "y\n");
}

const char* kParent =
    "import triton\n"
    "\n"
    "@triton.jit\n"
    "def kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
    "    pid = tl.program_id(0)\n"
    "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offs)\n"
    "    tl.store(x_ptr + offs, x)\n"
    "\n"
    "class ModelNew:\n"
    "    def forward(self, x):\n"
    "        BLOCK = 128\n"
    "        return x\n";

TEST(Edits, ParsesNumberedBlocksInOrder) {
  std::string reply =
      "Edits:\n<old_str_2>\nb\n</old_str_2>\n<new_str_2>\nB\n</new_str_2>\n"
      "<old_str_1>\n```python\na\n```\n</old_str_1>\n<new_str_1>\nA\n</new_str_1>\n";
  ParsedEdits p = ParseEdits(reply);
  ASSERT_TRUE(p.problems.empty()) << p.problems[0];
  ASSERT_EQ(p.edits.size(), 2u);
  EXPECT_EQ(p.edits[0].number, 1);
  EXPECT_EQ(p.edits[0].old_text, "a");  // fence unwrapped
  EXPECT_EQ(p.edits[1].new_text, "B");
}

TEST(Edits, MalformedBlocksAreReported) {
  ParsedEdits p = ParseEdits("<old_str_1>\na\n</old_str_1>\n<old_str_2>\nb\n</old_str_2><new_str_2>c</new_str_2>"
                             "<old_str_2>x</old_str_2><new_str_2>y</new_str_2><old_str_3>\nz");
  ASSERT_EQ(p.edits.size(), 1u);
  EXPECT_EQ(p.edits[0].number, 2);
  ASSERT_EQ(p.problems.size(), 3u);
  EXPECT_EQ(p.problems[0], "edit 1: no <new_str_1> block follows its old_str");
  EXPECT_EQ(p.problems[1], "edit 2: the number is used twice; the later block was not applied");
  EXPECT_EQ(p.problems[2], "edit 3: <old_str_3> is never closed by </old_str_3>");
}

TEST(Edits, ExactMatch) {
  EditReport r = ApplyEditReply(kParent,
                                "<old_str_1>\n        BLOCK = 128\n</old_str_1>\n<new_str_1>\n        BLOCK = 1024\n</new_str_1>");
  ASSERT_TRUE(r.all_applied()) << r.Summary();
  EXPECT_EQ(r.outcomes[0].how, EditHow::kExact);
  EXPECT_NE(r.text.find("BLOCK = 1024"), std::string::npos);
  EXPECT_EQ(r.text.find("BLOCK = 128\n"), std::string::npos);
  EXPECT_EQ(r.outcomes[0].message, "edit 1: applied (exact match at line 12)");
}

TEST(Edits, WhitespaceTolerantMatchReindents) {
  // The model dropped the indentation and doubled a space.
  std::string reply =
      "<old_str_1>\nx = tl.load(x_ptr  +  offs)\ntl.store(x_ptr + offs, x)\n</old_str_1>\n"
      "<new_str_1>\nx = tl.load(x_ptr + offs)\ny = x * 2\ntl.store(x_ptr + offs, y)\n</new_str_1>";
  EditReport r = ApplyEditReply(kParent, reply);
  ASSERT_TRUE(r.all_applied()) << r.Summary();
  EXPECT_EQ(r.outcomes[0].how, EditHow::kWhitespace);
  EXPECT_NE(r.text.find("    x = tl.load(x_ptr + offs)\n    y = x * 2\n    tl.store(x_ptr + offs, y)\n"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.outcomes[0].message, "edit 1: applied (matched ignoring whitespace at line 7)");
}

TEST(Edits, WhitespaceMatchAcrossBlankLines) {
  std::string reply =
      "<old_str_1>\n    tl.store(x_ptr + offs, x)\nclass ModelNew:\n</old_str_1>\n<new_str_1>\n"
      "    tl.store(x_ptr + offs, x)\n\n\nclass ModelNew(torch.nn.Module):\n</new_str_1>";
  EditReport r = ApplyEditReply(kParent, reply);
  ASSERT_TRUE(r.all_applied()) << r.Summary();
  EXPECT_NE(r.text.find("class ModelNew(torch.nn.Module):\n    def forward"), std::string::npos) << r.text;
}

TEST(Edits, NoMatchAndMultiMatchAreReportedNotSkipped) {
  std::string reply =
      "<old_str_1>\nx_ptr + offs\n</old_str_1><new_str_1>\nx_ptr + offs + 1\n</new_str_1>"
      "<old_str_2>\nreturn torch.relu(x)\n</old_str_2><new_str_2>\nreturn x\n</new_str_2>"
      "<old_str_3>\n        BLOCK = 128\n</old_str_3><new_str_3>\n        BLOCK = 256\n</new_str_3>";
  EditReport r = ApplyEditReply(kParent, reply);
  EXPECT_FALSE(r.all_applied());
  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.outcomes[0].how, EditHow::kAmbiguous);
  EXPECT_EQ(r.outcomes[0].matches, 2);
  EXPECT_EQ(r.outcomes[0].message,
            "edit 1: old_str matches 2 places (lines 7, 8); include more surrounding lines so it matches exactly one");
  EXPECT_EQ(r.outcomes[1].how, EditHow::kNoMatch);
  EXPECT_EQ(r.outcomes[1].message,
            "edit 2: old_str matches nothing in the kernel, even ignoring whitespace (its first line: 'return "
            "torch.relu(x)'); copy the lines exactly from the current kernel");
  EXPECT_TRUE(r.outcomes[2].applied());  // the good edit still applies
  EXPECT_NE(r.text.find("BLOCK = 256"), std::string::npos);
  EXPECT_NE(r.text.find("x = tl.load(x_ptr + offs)"), std::string::npos);  // ambiguous edit not applied
  std::string summary = r.Summary();
  EXPECT_NE(summary.find("edit 1: old_str matches 2 places"), std::string::npos);
  EXPECT_NE(summary.find("edit 3: applied"), std::string::npos);
}

TEST(Edits, WhitespaceAmbiguityIsReported) {
  std::string parent = "a = 1\nif x:\n    b  = 2\nelse:\n    b = 2\n";
  EditReport r = ApplyEdits(parent, {Edit{1, "b = 2", "b = 3"}});
  // Exact text "b = 2" occurs once (line 5), so it applies exactly.
  EXPECT_EQ(r.outcomes[0].how, EditHow::kExact);
  r = ApplyEdits(parent, {Edit{1, "b   = 2", "b = 3"}});
  EXPECT_EQ(r.outcomes[0].how, EditHow::kAmbiguous);
  EXPECT_NE(r.outcomes[0].message.find("ignoring whitespace (lines 3, 5)"), std::string::npos) << r.outcomes[0].message;
  EXPECT_EQ(r.text, parent);
}

TEST(Edits, EmptyOldAndNoBlocks) {
  EditReport r = ApplyEdits(kParent, {Edit{1, "  \n", "x"}});
  EXPECT_EQ(r.outcomes[0].how, EditHow::kInvalid);
  r = ApplyEditReply(kParent, "I think you should use a bigger block.");
  EXPECT_FALSE(r.all_applied());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0], "the reply holds no <old_str_N>/<new_str_N> edit blocks");
  EXPECT_EQ(r.text, kParent);
}

TEST(Edits, SequentialEditsSeeEarlierOnes) {
  EditReport r = ApplyEdits("x = 1\n", {Edit{1, "x = 1", "x = 2"}, Edit{2, "x = 2", "x = 3"}});
  ASSERT_TRUE(r.all_applied());
  EXPECT_EQ(r.text, "x = 3\n");
}

TEST(Retry, Classification) {
  auto cls = [](long status, std::string body = "", std::string err = "", bool to = false) {
    HttpResponse r;
    r.status = status;
    r.body = body;
    r.transport_error = err;
    r.timed_out = to;
    return ClassifyHttp(r);
  };
  EXPECT_EQ(cls(200).kind, ErrorKind::kNone);
  EXPECT_TRUE(cls(429).retryable);
  EXPECT_EQ(cls(429, R"({"error":{"code":"insufficient_quota"}})").kind, ErrorKind::kQuota);
  EXPECT_FALSE(cls(429, "insufficient_quota").retryable);
  EXPECT_TRUE(cls(500).retryable);
  EXPECT_TRUE(cls(529).retryable);
  EXPECT_TRUE(cls(408).retryable);
  for (long s : {400L, 401L, 403L, 404L, 422L}) EXPECT_FALSE(cls(s).retryable) << s;
  EXPECT_EQ(cls(0, "", "Operation timed out", true).kind, ErrorKind::kTimeout);
  EXPECT_EQ(cls(0, "", "Connection refused").kind, ErrorKind::kConnection);
  EXPECT_TRUE(cls(0, "", "Connection refused").retryable);
}

TEST(Retry, BackoffGrowsIsCappedAndJittered) {
  RetryPolicy p;
  p.initial_delay_s = 1;
  p.multiplier = 2;
  p.max_delay_s = 10;
  p.jitter = 0;
  std::mt19937_64 rng(7);
  EXPECT_DOUBLE_EQ(BackoffDelay(p, 1, -1, rng), 1);
  EXPECT_DOUBLE_EQ(BackoffDelay(p, 3, -1, rng), 4);
  EXPECT_DOUBLE_EQ(BackoffDelay(p, 10, -1, rng), 10);
  EXPECT_DOUBLE_EQ(BackoffDelay(p, 1, 7.5, rng), 7.5);  // Retry-After wins
  p.jitter = 0.5;
  double lo = 1e9, hi = 0;
  for (int i = 0; i < 200; i++) {
    double d = BackoffDelay(p, 3, -1, rng);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_GE(lo, 2.0);
  EXPECT_LE(hi, 4.0);
  EXPECT_GT(hi - lo, 1.0);  // really spread
}

}  // namespace
}  // namespace ax::llm
