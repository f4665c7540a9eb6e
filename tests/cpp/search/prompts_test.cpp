// Tests of the prompt templates: RenderTemplate's rules, and golden files of
// the rendered proposer, reviser and tuner prompts made from the real
// templates in prompts/.
//
// Golden files live in tests/cpp/search/golden/. When a template or the
// rendering changes on purpose, rewrite them and review the diff in git:
//
//   ADAEXPLORE_UPDATE_GOLDEN=1 adaexplore_search_tests --gtest_filter='PromptsGolden.*'
//
// Otherwise a difference fails the test, naming the first differing line and
// leaving the whole rendering beside the golden file's name in the test's
// temporary folder, for `diff -u`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/util.h"
#include "search/prompts.h"

#ifndef ADAEXPLORE_SOURCE_DIR
#error "the search tests need ADAEXPLORE_SOURCE_DIR (src/search/CMakeLists.txt)"
#endif

namespace ax::search {
namespace {

// ================================================================ RenderTemplate

std::string Render(const std::string& t, const std::map<std::string, std::string>& v) {
  std::string out = "left over";
  Status s = RenderTemplate(t, v, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

Status RenderError(const std::string& t, const std::map<std::string, std::string>& v) {
  std::string out;
  return RenderTemplate(t, v, &out);
}

TEST(RenderTemplate, PlainTextPassesThrough) {
  EXPECT_EQ(Render("", {}), "");
  EXPECT_EQ(Render("no tags here\n{ single } braces }}", {}), "no tags here\n{ single } braces }}");
}

TEST(RenderTemplate, SubstitutesValues) {
  EXPECT_EQ(Render("a {{x}} b {{y}}{{x}}", {{"x", "1"}, {"y", "two"}}), "a 1 b two1");
  EXPECT_EQ(Render("[{{empty}}]", {{"empty", ""}}), "[]");
  EXPECT_EQ(Render("{{v}}", {{"v", "line 1\nline 2\n"}}), "line 1\nline 2\n");
}

TEST(RenderTemplate, ValuesAreNotExpandedAgain) {
  // A task or a kernel may contain braces; they are inserted verbatim.
  EXPECT_EQ(Render("<{{src}}>", {{"src", "f'{{x}}' {{#y}} {{/z}}"}, {"x", "NO"}}), "<f'{{x}}' {{#y}} {{/z}}>");
}

TEST(RenderTemplate, OutputIsReplacedNotAppended) {
  std::string out = "stale";
  ASSERT_TRUE(RenderTemplate("fresh", {}, &out).ok());
  EXPECT_EQ(out, "fresh");
}

TEST(RenderTemplate, SectionShownWhenValueNonEmpty) {
  const std::map<std::string, std::string> on = {{"s", "yes"}}, off = {{"s", ""}};
  EXPECT_EQ(Render("a{{#s}}[{{s}}]{{/s}}b", on), "a[yes]b");
  EXPECT_EQ(Render("a{{#s}}[{{s}}]{{/s}}b", off), "ab");
}

TEST(RenderTemplate, InvertedSectionShownWhenValueEmpty) {
  const std::map<std::string, std::string> on = {{"s", "yes"}}, off = {{"s", ""}};
  EXPECT_EQ(Render("a{{^s}}none{{/s}}b", on), "ab");
  EXPECT_EQ(Render("a{{^s}}none{{/s}}b", off), "anoneb");
}

TEST(RenderTemplate, SectionTagsOnTheirOwnLinesLeaveNoLine) {
  const std::string t = "A\n{{#s}}\nB {{s}}\n{{/s}}\n{{^s}}\nnothing\n{{/s}}\nC\n";
  EXPECT_EQ(Render(t, {{"s", "x"}}), "A\nB x\nC\n");
  EXPECT_EQ(Render(t, {{"s", ""}}), "A\nnothing\nC\n");
}

TEST(RenderTemplate, InlineSectionKeepsTheLineBreakAfterIt) {
  // src/search/prompts.cpp:49 (and :38 for the opening tag) drop the newline
  // after a section tag whether or not the tag sits on a line of its own, so
  // an inline section joins its line with the next one: "Hello dear \nNext"
  // renders as "Hello dear Next". The shipped templates only put section tags
  // on lines of their own, so no prompt is affected today.
  EXPECT_EQ(Render("Hello {{#name}}dear {{/name}}\nNext", {{"name", "x"}}), "Hello dear \nNext");
  EXPECT_EQ(Render("Hello {{^name}}stranger{{/name}}\nNext", {{"name", "x"}}), "Hello \nNext");
}

TEST(RenderTemplate, NestedSections) {
  const std::string t = "{{#a}}A{{#b}}B{{/b}}{{^b}}-{{/b}}{{/a}}.";
  EXPECT_EQ(Render(t, {{"a", "1"}, {"b", "1"}}), "AB.");
  EXPECT_EQ(Render(t, {{"a", "1"}, {"b", ""}}), "A-.");
  EXPECT_EQ(Render(t, {{"a", ""}, {"b", "1"}}), ".");
}

TEST(RenderTemplate, UnknownValueIsAnError) {
  Status s = RenderError("hello {{nmae}}", {{"name", "x"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown value 'nmae'"), std::string::npos) << s.message();
}

TEST(RenderTemplate, UnknownSectionNameIsAnError) {
  Status s = RenderError("{{#typo}}x{{/typo}}", {{"name", "x"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown value 'typo'"), std::string::npos) << s.message();
}

TEST(RenderTemplate, UnclosedSectionIsAnError) {
  Status s = RenderError("a {{#s}} b", {{"s", "1"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("section s never closed"), std::string::npos) << s.message();
  s = RenderError("a {{^s}} b {{/t}}", {{"s", ""}, {"t", ""}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("never closed"), std::string::npos) << s.message();
}

TEST(RenderTemplate, UnclosedTagIsAnError) {
  Status s = RenderError("a {{name b", {{"name", "1"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unclosed {{"), std::string::npos) << s.message();
}

TEST(RenderTemplate, StrayCloseAndEmptyTagsAreErrors) {
  EXPECT_FALSE(RenderError("a {{/s}} b", {{"s", "1"}}).ok());
  EXPECT_FALSE(RenderError("a {{}} b", {}).ok());
}

TEST(RenderTemplate, ErrorsAreOneLine) {
  for (const std::string t : {"{{x}}", "{{#x}}", "{{x", "{{/x}}", "{{}}"}) {
    Status s = RenderError(t, {});
    ASSERT_FALSE(s.ok()) << t;
    EXPECT_FALSE(s.message().empty()) << t;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  }
}

// ================================================================ loading

class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = getenv(name)) old_ = v;
  }
  ~EnvGuard() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PromptsLoad, DefaultDirIsTheSourceTreeUnlessOverridden) {
  EnvGuard g("ADAEXPLORE_PROMPTS_DIR");
  unsetenv("ADAEXPLORE_PROMPTS_DIR");
  EXPECT_EQ(Prompts::DefaultDir(), std::string(ADAEXPLORE_SOURCE_DIR) + "/prompts");
  setenv("ADAEXPLORE_PROMPTS_DIR", "/somewhere/else", 1);
  EXPECT_EQ(Prompts::DefaultDir(), "/somewhere/else");
}

TEST(PromptsLoad, MissingFolderNamesTheMissingFile) {
  Prompts p;
  Status s = Prompts::Load("/nonexistent/adaexplore-prompts", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/adaexplore-prompts/system.txt"), std::string::npos) << s.message();
}

TEST(PromptsLoad, BrokenTemplateFailsToRenderWithAReason) {
  std::string dir = MakeTempDir(::testing::TempDir(), "axprompts");
  ASSERT_FALSE(dir.empty());
  for (const char* f : {"system.txt", "reviser.txt", "tuner.txt", "example_reference.py", "example_triton.py",
                        "example_cuda.py"}) {
    ASSERT_TRUE(WriteFile(dir + "/" + f, std::string("ok {{backend_name}}\n")));
  }
  ASSERT_TRUE(WriteFile(dir + "/proposer.txt", "{{#pool}}never closed\n"));
  Prompts p;
  ASSERT_TRUE(Prompts::Load(dir, &p).ok());
  RenderedPrompt out;
  Status s = p.Proposer(PromptInputs{}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pool"), std::string::npos) << s.message();
  EXPECT_TRUE(p.Reviser(PromptInputs{}, &out).ok());
  EXPECT_EQ(out.user, "ok Triton\n");
  RemoveTree(dir);
}

// ================================================================ golden files

std::string GoldenDir() { return std::string(ADAEXPLORE_SOURCE_DIR) + "/tests/cpp/search/golden"; }

bool UpdateGolden() {
  const char* v = getenv("ADAEXPLORE_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = GoldenDir() + "/" + name;
  if (UpdateGolden()) {
    ASSERT_TRUE(WriteFile(path, actual)) << "cannot write " << path;
    std::printf("[golden] rewrote %s\n", path.c_str());
    return;
  }
  const std::string actual_path = ::testing::TempDir() + "adaexplore_actual_" + name;
  WriteFile(actual_path, actual);
  auto expected = ReadFile(path);
  ASSERT_TRUE(expected.has_value()) << "golden file missing: " << path << "\n  this rendering is in " << actual_path
                                    << "\n  create it with ADAEXPLORE_UPDATE_GOLDEN=1 adaexplore_search_tests";
  if (*expected == actual) return;
  std::vector<std::string> e = Lines(*expected), a = Lines(actual);
  size_t i = 0;
  while (i < e.size() && i < a.size() && e[i] == a[i]) ++i;
  ADD_FAILURE() << "the rendered prompt differs from " << path << " at line " << (i + 1) << ":\n"
                << "  golden: " << (i < e.size() ? "\"" + e[i] + "\"" : "<end of file>") << "\n"
                << "  actual: " << (i < a.size() ? "\"" + a[i] + "\"" : "<end of file>") << "\n"
                << "  (" << e.size() << " golden lines, " << a.size() << " actual lines)\n"
                << "  see: diff -u " << path << " " << actual_path << "\n"
                << "  if the change is intended: ADAEXPLORE_UPDATE_GOLDEN=1 adaexplore_search_tests "
                   "--gtest_filter='PromptsGolden.*', then review the diff in git";
}

std::string Dump(const RenderedPrompt& p) { return "===== system =====\n" + p.system + "\n===== user =====\n" + p.user; }

const char* kTask = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    """Computes a row-wise softmax."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
)";

const char* kTritonA = R"(import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
)";

const char* kTritonB = R"(import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols)
        tl.store(out_ptr + row * n_cols + offs, tl.exp(x - m) / s, mask=offs < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        online_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=2048)
        return out
)";

const char* kCudaA = R"(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void softmax_rows(const float* x, float* out, int n) {
    int row = blockIdx.x;
    float m = -INFINITY, s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[row * n + i]);
    // (block reductions elided)
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[row * n + i] = expf(x[row * n + i] - m) / s;
}
torch::Tensor softmax(torch::Tensor x) {
    auto out = torch::empty_like(x);
    softmax_rows<<<x.size(0), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.size(1));
    return out;
}
"""

ext = load_inline("softmax_ext", cpp_sources="torch::Tensor softmax(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["softmax"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax(x)
)";

const std::vector<std::string> kRules = {
    "You cannot call tl.float32 as a function inside a Triton kernel.",
    "You cannot use the 'continue' statement in a Triton kernel.",
};

PromptInputs Base(const std::string& backend) {
  PromptInputs in;
  in.task_source = kTask;
  in.backend = backend;
  in.tolerance = "strict";
  in.fp32_tol = 1e-4;
  in.hardware = "an NVIDIA H200 (132 SMs, 141 GB HBM3e)";
  return in;
}

std::vector<ShownKernel> TritonPool() {
  return {{kTritonB, "correct, 2.310x vs eager PyTorch (0.0433 ms)", "", ""},
          {kTritonA, "correct, 1.420x vs eager PyTorch (0.0704 ms)", "guidance:\n- Use one program per row.", ""}};
}

class PromptsGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    // The real templates, from the default folder (the source tree).
    guard_ = std::make_unique<EnvGuard>("ADAEXPLORE_PROMPTS_DIR");
    unsetenv("ADAEXPLORE_PROMPTS_DIR");
    Status s = Prompts::Load("", &prompts_);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  void TearDown() override { guard_.reset(); }

  std::string Proposer(const PromptInputs& in) {
    RenderedPrompt out;
    Status s = prompts_.Proposer(in, &out);
    EXPECT_TRUE(s.ok()) << s.message();
    return Dump(out);
  }
  std::string Reviser(const PromptInputs& in) {
    RenderedPrompt out;
    Status s = prompts_.Reviser(in, &out);
    EXPECT_TRUE(s.ok()) << s.message();
    return Dump(out);
  }
  std::string Tuner(const PromptInputs& in) {
    RenderedPrompt out;
    Status s = prompts_.Tuner(in, &out);
    EXPECT_TRUE(s.ok()) << s.message();
    return Dump(out);
  }

  std::unique_ptr<EnvGuard> guard_;
  Prompts prompts_;
};

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST_F(PromptsGolden, ProposerTriton) {
  std::string p = Proposer(Base("triton"));
  EXPECT_TRUE(Has(p, "custom Triton kernels"));
  EXPECT_TRUE(Has(p, "@triton.jit"));
  EXPECT_TRUE(Has(p, "atol=rtol=0.0001"));
  EXPECT_TRUE(Has(p, "## An example of the format"));
  EXPECT_FALSE(Has(p, "## Rules learnt"));
  EXPECT_FALSE(Has(p, "## Earlier kernels"));
  EXPECT_FALSE(Has(p, "{{")) << "an unrendered tag";
  ExpectGolden("proposer_triton.txt", p);
}

TEST_F(PromptsGolden, ProposerTritonBf16) {
  PromptInputs in = Base("triton");
  in.half_precision = "bf16";
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "The task runs in bf16"));
  EXPECT_TRUE(Has(p, "the outputs must be torch.bfloat16 too (atol=rtol=0.01)"));
  EXPECT_FALSE(Has(p, "{{")) << "an unrendered tag";
  ExpectGolden("proposer_triton_bf16.txt", p);
  // In fp32 the prompt says nothing of another precision.
  EXPECT_FALSE(Has(Proposer(Base("triton")), "The task runs in"));
}

TEST_F(PromptsGolden, ProposerTritonRules) {
  PromptInputs in = Base("triton");
  in.rules = kRules;
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "## Rules learnt from earlier mistakes\n\n- You cannot call tl.float32"));
  EXPECT_TRUE(Has(p, "## An example of the format"));
  ExpectGolden("proposer_triton_rules.txt", p);
}

TEST_F(PromptsGolden, ProposerTritonPool) {
  PromptInputs in = Base("triton");
  in.pool = TritonPool();
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "### Kernel 1: correct, 2.310x"));
  EXPECT_TRUE(Has(p, "### Kernel 2: correct, 1.420x"));
  EXPECT_TRUE(Has(p, "Made from this guidance or feedback:\nguidance:\n- Use one program per row."));
  EXPECT_FALSE(Has(p, "## An example of the format")) << "the pool replaces the one-shot example";
  EXPECT_FALSE(Has(p, "## Rules learnt"));
  ExpectGolden("proposer_triton_pool.txt", p);
}

TEST_F(PromptsGolden, ProposerTritonPoolRules) {
  PromptInputs in = Base("triton");
  in.pool = TritonPool();
  in.rules = kRules;
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "## Rules learnt"));
  EXPECT_TRUE(Has(p, "## Earlier kernels"));
  EXPECT_LT(p.find("## Rules learnt"), p.find("## Earlier kernels"));
  ExpectGolden("proposer_triton_pool_rules.txt", p);
}

TEST_F(PromptsGolden, ProposerCuda) {
  PromptInputs in = Base("cuda");
  in.tolerance = "kernelbench-v0.1";
  in.fp32_tol = 1e-2;
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "custom CUDA kernels"));
  EXPECT_TRUE(Has(p, "load_inline"));
  EXPECT_TRUE(Has(p, "tolerance `kernelbench-v0.1`"));
  EXPECT_TRUE(Has(p, "atol=rtol=0.01"));
  EXPECT_TRUE(Has(p, "You write CUDA kernels"));
  ExpectGolden("proposer_cuda.txt", p);
}

TEST_F(PromptsGolden, ProposerCudaPoolRules) {
  PromptInputs in = Base("cuda");
  in.rules = {"You cannot launch a kernel with more than 1024 threads per block."};
  in.pool = {{kCudaA, "correct, 1.050x vs eager PyTorch (0.0952 ms)", "", ""}};
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "### Kernel 1: correct, 1.050x"));
  EXPECT_FALSE(Has(p, "### Kernel 2"));
  ExpectGolden("proposer_cuda_pool_rules.txt", p);
}

PromptInputs SmallStep(const std::string& backend) {
  PromptInputs in = Base(backend);
  in.path = {
      {kTritonA, "correct, 1.420x vs eager PyTorch (0.0704 ms)", "", ""},
      {std::string(kTritonA) + "\n# tuned\n",
       "compile_error: NameError: name 'tl.float32' is not callable\n\n```\nTraceback (most recent call last):\n"
       "  File \"candidate.py\", line 12\nNameError: name 'tl.float32' is not callable\n```",
       "guidance:\n- Cast with x.to(tl.float32).", ""},
  };
  in.parent = in.path.back();
  return in;
}

TEST_F(PromptsGolden, ReviserTriton) {
  std::string p = Reviser(SmallStep("triton"));
  EXPECT_TRUE(Has(p, "### Attempt 1: correct, 1.420x"));
  EXPECT_TRUE(Has(p, "### Attempt 2: compile_error: NameError"));
  EXPECT_TRUE(Has(p, "Made from this guidance or feedback:\nguidance:\n- Cast with x.to(tl.float32)."));
  EXPECT_LT(p.find("### Attempt 1"), p.find("### Attempt 2")) << "oldest first";
  ExpectGolden("reviser_triton.txt", p);
}

// Profiled kernels: the pool, the path and the tuner's parent show the profile line.
TEST_F(PromptsGolden, ProposerTritonPoolProfiled) {
  PromptInputs in = Base("triton");
  in.pool = TritonPool();
  in.pool[0].profile = "1 kernel; `fused_row_kernel` 100% of 0.0391 ms; 81% of copy bandwidth (memory-bound)";
  std::string p = Proposer(in);
  EXPECT_TRUE(Has(p, "### Kernel 1: correct, 2.310x vs eager PyTorch (0.0433 ms)\n\nProfile: 1 kernel; "
                     "`fused_row_kernel` 100% of 0.0391 ms; 81% of copy bandwidth (memory-bound)\n\n```python"));
  EXPECT_EQ(p.find("Profile:"), p.rfind("Profile:")) << "only the profiled kernel has a profile line";
  ExpectGolden("proposer_triton_pool_profiled.txt", p);
}

TEST_F(PromptsGolden, ReviserAndTunerTritonProfiled) {
  PromptInputs in = SmallStep("triton");
  in.path[0].profile = "2 kernels; `bias_relu` 71% of 1.84 ms; 38% of copy bandwidth (memory-bound)";
  in.parent = in.path[0];
  std::string r = Reviser(in);
  EXPECT_TRUE(Has(r, "### Attempt 1: correct, 1.420x vs eager PyTorch (0.0704 ms)\n\nProfile: 2 kernels; "
                     "`bias_relu` 71% of 1.84 ms; 38% of copy bandwidth (memory-bound)"));
  EXPECT_TRUE(Has(r, "profile line"));
  ExpectGolden("reviser_triton_profiled.txt", r);
  in.guidance = "- Fuse the second kernel into the first.\n";
  std::string t = Tuner(in);
  EXPECT_TRUE(Has(t, "Its current verdict:\ncorrect, 1.420x vs eager PyTorch (0.0704 ms)\nProfile: 2 kernels;"));
}

TEST_F(PromptsGolden, ReviserCuda) {
  PromptInputs in = Base("cuda");
  in.path = {{kCudaA, "mismatch: max abs error 0.25 > atol 0.0001", "", ""}};
  in.parent = in.path.back();
  std::string p = Reviser(in);
  EXPECT_TRUE(Has(p, "a CUDA kernel"));
  ExpectGolden("reviser_cuda.txt", p);
}

TEST_F(PromptsGolden, TunerTriton) {
  PromptInputs in = SmallStep("triton");
  in.guidance = "- Use x.to(tl.float32) instead of calling tl.float32.\n- Keep BLOCK a power of two.\n";
  std::string p = Tuner(in);
  EXPECT_TRUE(Has(p, "Its current verdict:\ncompile_error: NameError"));
  EXPECT_TRUE(Has(p, "## Guidance\n\n- Use x.to(tl.float32)"));
  EXPECT_TRUE(Has(p, "# tuned\n```"));
  EXPECT_FALSE(Has(p, "## Your previous edits could not be applied"));
  EXPECT_FALSE(Has(p, "## Rules learnt"));
  ExpectGolden("tuner_triton.txt", p);
}

TEST_F(PromptsGolden, TunerTritonFeedbackRules) {
  PromptInputs in = SmallStep("triton");
  in.guidance = "- Use x.to(tl.float32) instead of calling tl.float32.";
  in.rules = kRules;
  in.feedback =
      "edit 1: old_str matches nothing in the kernel, even ignoring whitespace (its first line: 'x = "
      "tl.float32(x)'); copy the lines exactly from the current kernel\n";
  std::string p = Tuner(in);
  EXPECT_TRUE(Has(p, "## Your previous edits could not be applied\n\nedit 1: old_str matches nothing"));
  EXPECT_TRUE(Has(p, "## Rules learnt"));
  EXPECT_LT(p.find("## Rules learnt"), p.find("## Your previous edits"));
  ExpectGolden("tuner_triton_feedback_rules.txt", p);
}

TEST_F(PromptsGolden, TunerCudaFeedback) {
  PromptInputs in = Base("cuda");
  in.parent = {kCudaA, "correct, 1.050x vs eager PyTorch (0.0952 ms)", "", ""};
  in.path = {in.parent};
  in.guidance = "- Use a warp-level reduction for the row maximum.";
  in.feedback = "edit 1: old_str matches 2 places (lines 8, 10); include more surrounding lines so it matches "
                "exactly one\n";
  std::string p = Tuner(in);
  EXPECT_TRUE(Has(p, "Improve the CUDA kernel below"));
  EXPECT_TRUE(Has(p, "## Your previous edits could not be applied"));
  ExpectGolden("tuner_cuda_feedback.txt", p);
}

TEST_F(PromptsGolden, TaskSourceWithBracesRendersVerbatim) {
  PromptInputs in = Base("triton");
  in.task_source = std::string(kTask) + "\n# f\"{{not a tag}}\" {{#pool}}\n";
  RenderedPrompt out;
  Status s = prompts_.Proposer(in, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(Has(out.user, "# f\"{{not a tag}}\" {{#pool}}\n```"));
}

}  // namespace
}  // namespace ax::search
