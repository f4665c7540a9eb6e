// Task synthesis: the catalogue's shape rules, the composer (consistent
// shapes, determinism, no degenerate chains), deduplication, rejection
// records and the LLM path with a scripted client. Tests that need the
// judge's real worker skip when no Python with torch is found.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>

#include "adapt/catalogue.h"
#include "adapt/composer.h"
#include "adapt/synth.h"
#include "adapt/task_signature.h"
#include "common/util.h"
#include "judge/judge.h"
#include "llm/client.h"

namespace ax::adapt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<json> ReadJsonl(const std::string& path) {
  std::vector<json> out;
  auto text = ReadFile(path);
  if (!text) return out;
  std::stringstream ss(*text);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

std::vector<std::string> PyFiles(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".py") v.push_back(e.path().filename().string());
  }
  std::sort(v.begin(), v.end());
  return v;
}

class TempDir {
 public:
  TempDir() { path_ = MakeTempDir(fs::temp_directory_path().string(), "synth-test-"); }
  ~TempDir() { RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A judge that runs nothing: CheckTask answers from markers in the source.
class FakeJudge : public Judge {
 public:
  bool broken = false;  // the environment: every call fails with no task error
  int checks = 0;
  std::future<EvalResult> Submit(EvalRequest) override {
    std::promise<EvalResult> p;
    p.set_value({Status::Error("not used"), false, {}});
    return p.get_future();
  }
  Status CheckTask(const TaskRef& t, const JudgeOptions&, TaskInfo* info) override {
    ++checks;
    *info = TaskInfo{};
    if (broken) return Status::Error("judge worker (python3) did not start: No module named 'torch'");
    if (t.source.find("FAIL_ME") != std::string::npos) {
      info->error = "reference forward failed: RuntimeError: boom";
      return Status::Error(t.name + ": " + info->error);
    }
    info->ok = true;
    if (t.source.find("DEGENERATE_ME") != std::string::npos) info->degenerate = {"input_independent"};
    info->outputs_json = t.source.find("HUGE_ME") != std::string::npos
                             ? R"([{"shape": [1024, 1024, 1024], "dtype": "float32"}])"
                             : R"([{"shape": [8, 16], "dtype": "float32"}])";
    return Status::Ok();
  }
};

// An LLM client answering from a script, in order; records the prompts.
class ScriptedLlm : public llm::LlmClient {
 public:
  struct Item {
    std::string text;
    llm::ErrorKind error = llm::ErrorKind::kNone;
  };
  std::deque<Item> script;
  std::vector<std::string> prompts;

  void ChatAsync(llm::ChatRequest req, llm::ChatCallback done) override {
    prompts.push_back(req.messages.at(0).content);
    llm::ChatResult r;
    r.provider = "fake";
    r.model = "scripted";
    if (script.empty()) {
      r.status = Status::Error("replay: no recorded reply left for this request");
      r.error = llm::ErrorKind::kReplayMiss;
    } else {
      Item it = script.front();
      script.pop_front();
      if (it.error != llm::ErrorKind::kNone) {
        r.status = Status::Error(std::string("fake: ") + llm::ErrorKindName(it.error));
        r.error = it.error;
      } else {
        r.reply.text = it.text;
      }
    }
    done(std::move(r));
  }
  std::string Describe() const override { return "fake:scripted"; }
};

std::string Fenced(const std::string& code) { return "Here it is.\n\n```python\n" + code + "```\n"; }

// A valid, non-degenerate task; `act` is the activation's spelling.
std::string LlmTask(const std::string& act, int features = 64, const std::string& extra = "") {
  return "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
         "    \"\"\"Linear, then an activation, then a scale.\"\"\"\n"
         "    def __init__(self, in_features, out_features, scale):\n"
         "        super(Model, self).__init__()\n"
         "        self.linear = nn.Linear(in_features, out_features)\n"
         "        self.scale = scale\n\n"
         "    def forward(self, x):\n"
         "        x = self.linear(x)  # project\n"
         "        x = " + act + "(x)\n" + extra +
         "        return x * self.scale\n\n\n"
         "batch_size = 8\nin_features = " + std::to_string(features) + "\nout_features = 16\nscale = 2.0\n\n\n"
         "def get_inputs():\n    return [torch.randn(batch_size, in_features)]\n\n\n"
         "def get_init_inputs():\n    return [in_features, out_features, scale]\n";
}

// The interpreter the real worker would use, if it has torch.
std::string PythonWithTorch() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("ADAEXPLORE_PYTHON"); p && *p) candidates.push_back(p);
  candidates.push_back(std::string(ADAEXPLORE_SOURCE_DIR) + "/.venv/bin/python");
  candidates.push_back("/tmp/venvtest/bin/python");
  for (const auto& py : candidates) {
    if (access(py.c_str(), X_OK) != 0) continue;
    std::string cmd = "'" + py + "' -c 'import torch' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

// One CPU judge for every test that needs the real worker (starting one
// imports torch, which takes seconds).
Judge* CpuJudge(const std::string& python) {
  static std::unique_ptr<Judge> judge = [&] {
    PoolConfig cfg = DefaultPoolConfig();
    cfg.python = python;
    cfg.devices = {"cpu"};
    cfg.workers_per_device = 1;
    cfg.max_spawns = 0;
    return MakeJudgePool(cfg);
  }();
  return judge.get();
}

#define SKIP_WITHOUT_TORCH(var)                                                              \
  std::string var = PythonWithTorch();                                                       \
  if (var.empty()) GTEST_SKIP() << "no Python with torch (set ADAEXPLORE_PYTHON)";

// ---- the catalogue ----

TEST(Catalogue, HasTheIssuesOperators) {
  for (const char* k : {"Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "ConvTranspose3d", "BatchNorm1d",
                        "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm2d", "MaxPool2d",
                        "AvgPool2d", "AdaptiveAvgPool2d", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU",
                        "Hardswish", "Mish", "Softplus", "ELU", "Softmax", "LogSoftmax", "Clamp", "Add", "Subtract",
                        "Multiply", "Divide", "ResidualAdd", "Mean", "Sum", "Max", "Amax", "LogSumExp", "Flatten"}) {
    const OpSpec* op = FindOp(k);
    ASSERT_NE(op, nullptr) << k;
    EXPECT_FALSE(op->ranks.empty()) << k;
    EXPECT_FALSE(op->shape_rule.empty()) << k;
    EXPECT_NE(DescribeOp(*op).find(k), std::string::npos);
  }
  EXPECT_EQ(FindOp("Dropout"), nullptr);
}

TEST(Catalogue, InferShape) {
  Shape out;
  ASSERT_TRUE(InferShape({"Conv2d", {{"out_channels", 16}, {"kernel_size", 3}}}, {8, 3, 32, 32}, &out).ok());
  EXPECT_EQ(out, (Shape{8, 16, 30, 30}));
  ASSERT_TRUE(
      InferShape({"Conv2d", {{"out_channels", 4}, {"kernel_size", 3}, {"stride", 2}, {"padding", 1}}}, {2, 3, 15, 16}, &out)
          .ok());
  EXPECT_EQ(out, (Shape{2, 4, 8, 8}));
  ASSERT_TRUE(InferShape({"ConvTranspose3d", {{"out_channels", 8}, {"kernel_size", 3}, {"stride", 2}, {"padding", 1}}},
                         {2, 4, 5, 6, 7}, &out)
                  .ok());
  EXPECT_EQ(out, (Shape{2, 8, 9, 11, 13}));
  ASSERT_TRUE(InferShape({"Conv1d", {{"out_channels", 6}, {"kernel_size", 5}}}, {4, 3, 20}, &out).ok());
  EXPECT_EQ(out, (Shape{4, 6, 16}));
  ASSERT_TRUE(InferShape({"Linear", {{"out_features", 10}}}, {4, 7, 32}, &out).ok());
  EXPECT_EQ(out, (Shape{4, 7, 10}));
  ASSERT_TRUE(InferShape({"MaxPool2d", {{"kernel_size", 3}}}, {2, 4, 10, 9}, &out).ok());
  EXPECT_EQ(out, (Shape{2, 4, 3, 3}));
  ASSERT_TRUE(InferShape({"AdaptiveAvgPool2d", {{"output_size", 1}}}, {2, 4, 10, 9}, &out).ok());
  EXPECT_EQ(out, (Shape{2, 4, 1, 1}));
  ASSERT_TRUE(InferShape({"Mean", {{"dim", 1}, {"keepdim", true}}}, {2, 4, 10}, &out).ok());
  EXPECT_EQ(out, (Shape{2, 1, 10}));
  ASSERT_TRUE(InferShape({"LogSumExp", {{"dim", 2}}}, {2, 4, 10}, &out).ok());
  EXPECT_EQ(out, (Shape{2, 4}));
  ASSERT_TRUE(InferShape({"Flatten", {}}, {2, 4, 3, 5}, &out).ok());
  EXPECT_EQ(out, (Shape{2, 60}));
  ASSERT_TRUE(InferShape({"GELU", {}}, {7}, &out).ok());
  EXPECT_EQ(out, (Shape{7}));

  Status s = InferShape({"GroupNorm", {{"num_groups", 3}}}, {2, 8, 4, 4}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not divide"), std::string::npos) << s.message();
  EXPECT_FALSE(InferShape({"Conv2d", {{"out_channels", 4}, {"kernel_size", 3}}}, {2, 3, 32}, &out).ok());
  EXPECT_FALSE(InferShape({"Conv2d", {{"out_channels", 4}, {"kernel_size", 5}}}, {2, 3, 4, 4}, &out).ok());
  EXPECT_FALSE(InferShape({"Mean", {{"dim", 0}}}, {2, 3}, &out).ok());
  EXPECT_FALSE(InferShape({"Softmax", {{"dim", 3}}}, {2, 3, 4}, &out).ok());
  EXPECT_FALSE(InferShape({"Clamp", {{"min", 1.0}, {"max", 0.0}}}, {2, 3}, &out).ok());
  EXPECT_FALSE(InferShape({"Linear", {}}, {2, 3}, &out).ok());
  EXPECT_FALSE(InferShape({"Nope", {}}, {2, 3}, &out).ok());
}

// ---- the composer ----

// What the static scanner calls each composer operator.
std::string ScannedKind(const OpInstance& op) {
  const std::string& k = op.kind;
  if (k == "ResidualAdd" || k == "BiasAdd") return "Add";
  if (k == "Mean" || k == "Sum" || k == "Max" || k == "Amax" || k == "LogSumExp" || k == "Softmax" ||
      k == "LogSoftmax") {
    std::string note = "(" + std::to_string(op.params.value("dim", 0));
    if (op.params.value("keepdim", false)) note += ",k";
    return k + note + ")";
  }
  return k;
}

TEST(Composer, ShapesAreConsistentForManySeeds) {
  std::set<std::string> kinds_seen;
  for (SizeScale scale : {SizeScale::kSmall, SizeScale::kMedium, SizeScale::kKernelBench}) {
    const ScaleLimits& lim = LimitsFor(scale);
    Composer c(scale, 1234);
    for (int i = 0; i < 300; ++i) {
      ComposedTask t;
      ASSERT_TRUE(c.Next(&t).ok());
      ASSERT_GE(t.ops.size(), 3u);
      ASSERT_LE(t.ops.size(), 6u);
      ASSERT_EQ(t.ops.size(), t.shapes.size());
      EXPECT_LE(NumElements(t.input), lim.max_elements);
      Shape cur = t.input;
      for (size_t j = 0; j < t.ops.size(); ++j) {
        Shape next;
        Status s = InferShape(t.ops[j], cur, &next);
        ASSERT_TRUE(s.ok()) << s.message() << "\n" << t.source;
        EXPECT_EQ(next, t.shapes[j]) << t.source;
        EXPECT_LE(NumElements(next), lim.max_elements);
        if (t.ops[j].kind == "ResidualAdd") {
          // It adds an earlier tensor of the same shape.
          int from = t.ops[j].params.at("from");
          Shape earlier = from == 0 ? t.input : t.shapes[from - 1];
          EXPECT_EQ(earlier, cur);
        }
        cur = next;
        kinds_seen.insert(t.ops[j].kind);
      }
      // The file says what the chain is.
      std::vector<std::string> expected;
      for (const auto& op : t.ops) expected.push_back(ScannedKind(op));
      EXPECT_EQ(ForwardOps(t.source), expected) << t.source;
      EXPECT_EQ(InputRanks(t.source), std::vector<int>{static_cast<int>(t.input.size())});
      EXPECT_NE(t.source.find("import torch\nimport torch.nn as nn\n"), std::string::npos);
      EXPECT_NE(t.source.find("class Model(nn.Module):"), std::string::npos);
      EXPECT_NE(t.source.find("def get_init_inputs():"), std::string::npos);
      std::string name;
      for (const auto& op : t.ops) name += (name.empty() ? "" : "_") + op.kind;
      EXPECT_EQ(t.name, name);
    }
  }
  // Nearly the whole catalogue shows up.
  EXPECT_GE(kinds_seen.size(), Catalogue().size() - 2) << kinds_seen.size();
}

TEST(Composer, DeterministicBySeed) {
  Composer a(SizeScale::kSmall, 7), b(SizeScale::kSmall, 7), c(SizeScale::kSmall, 8);
  int differ = 0;
  for (int i = 0; i < 20; ++i) {
    ComposedTask ta, tb, tc;
    ASSERT_TRUE(a.Next(&ta).ok());
    ASSERT_TRUE(b.Next(&tb).ok());
    ASSERT_TRUE(c.Next(&tc).ok());
    EXPECT_EQ(ta.source, tb.source);
    differ += ta.source != tc.source;
  }
  EXPECT_GE(differ, 18);
}

TEST(Composer, EmitsConstructorArgumentsInLayerOrder) {
  std::vector<OpInstance> ops = {
      {"Conv2d", {{"out_channels", 16}, {"kernel_size", 3}, {"stride", 1}, {"padding", 1}}},
      {"GroupNorm", {{"num_groups", 4}}},
      {"Multiply", {{"value", 2.0}}},
      {"ResidualAdd", {{"from", 1}}},
      {"Mean", {{"dim", 1}, {"keepdim", true}}},
  };
  std::vector<Shape> shapes = {{4, 16, 8, 8}, {4, 16, 8, 8}, {4, 16, 8, 8}, {4, 16, 8, 8}, {4, 1, 8, 8}};
  std::string src = EmitTask({4, 3, 8, 8}, false, ops, shapes, std::vector<bool>(5, false));
  EXPECT_NE(src.find("def __init__(self, in_channels, out_channels, kernel_size, padding, num_groups, scaling_factor):"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)"), std::string::npos);
  EXPECT_NE(src.find("self.group_norm = nn.GroupNorm(num_groups, out_channels)"), std::string::npos);
  EXPECT_NE(src.find("residual = x\n"), std::string::npos);
  EXPECT_NE(src.find("x = x + residual"), std::string::npos);
  EXPECT_NE(src.find("x = torch.mean(x, dim=1, keepdim=True)"), std::string::npos);
  EXPECT_NE(src.find("return [torch.rand(batch_size, in_channels, height, width)]"), std::string::npos);
  EXPECT_NE(src.find("return [in_channels, out_channels, kernel_size, padding, num_groups, scaling_factor]"),
            std::string::npos);
  EXPECT_NE(src.find("scaling_factor = 2.0\n"), std::string::npos);
}

TEST(Composer, SizeFlag) {
  SizeScale s;
  EXPECT_TRUE(ParseSizeScale("kernelbench", &s).ok());
  EXPECT_EQ(s, SizeScale::kKernelBench);
  Status bad = ParseSizeScale("huge", &s);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("small, medium or kernelbench"), std::string::npos);
}

// ---- deduplication ----

TEST(Signature, NormalisedSourceIgnoresCommentsLayoutAndNumbers) {
  std::string a = LlmTask("torch.relu");
  std::string b = "# a synthesised task\n" + LlmTask("torch.relu", 128);
  b.replace(b.find("\"\"\"Linear, then an activation, then a scale.\"\"\""), 48, "'''Other words.'''");
  b.replace(b.find("x = self.linear(x)  # project"), 29, "x   =   self.linear( x )");
  EXPECT_EQ(NormaliseSource(a), NormaliseSource(b));
  EXPECT_NE(NormaliseSource(a), NormaliseSource(LlmTask("torch.tanh")));
  EXPECT_EQ(NormaliseSource("x = 1.5e-3 + y  # c\n\n\n"), "x = N + y");
  EXPECT_EQ(NormaliseSource("s = 'a # not a comment'\n"), "s = \"\"");
}

TEST(Signature, SameChainInOtherWords) {
  std::string functional = LlmTask("torch.nn.functional.relu");
  std::string method = LlmTask("torch.relu");
  std::string module = LlmTask("self.act");
  module.replace(module.find("        self.scale = scale\n"), 0, "        self.act = nn.ReLU()\n");
  const std::string out = R"([{"shape": [8, 16], "dtype": "float32"}])";
  EXPECT_EQ(TaskSignature(functional, out), "in[2] Linear>ReLU>Multiply out[2]");
  EXPECT_EQ(TaskSignature(method, out), TaskSignature(functional, out));
  EXPECT_EQ(TaskSignature(module, out), TaskSignature(functional, out));
  EXPECT_NE(TaskSignature(LlmTask("torch.sigmoid"), out), TaskSignature(functional, out));
  // Reductions carry their dim; spellings of it agree.
  EXPECT_EQ(ForwardOps("class Model:\n    def forward(self, x):\n        return torch.sum(x, dim=2, keepdim=True)\n"),
            std::vector<std::string>{"Sum(2,k)"});
  EXPECT_EQ(ForwardOps("class Model:\n    def forward(self, x):\n        return x.sum(2, keepdim=True)\n"),
            std::vector<std::string>{"Sum(2,k)"});
  EXPECT_EQ(InputRanks("def get_inputs():\n    a = torch.randn((4, 5, 6))\n    return [a, torch.rand(3, 2)]\n"),
            (std::vector<int>{3, 2}));
  EXPECT_EQ(OutputBytes(R"([{"shape": [2, 3], "dtype": "float32"}, {"shape": [4], "dtype": "float16"}])"), 32);
  EXPECT_EQ(OutputBytes("not json"), -1);
  EXPECT_EQ(TaskNameFromOps({"Conv2d", "Mean(1,k)", "ReLU"}), "Conv2d_Mean_ReLU");
}

// ---- the synthesis loop, with a fake judge ----

SynthOptions Options(const std::string& dir, int count, uint64_t seed = 1) {
  SynthOptions o;
  o.out_dir = dir;
  o.count = count;
  o.seed = seed;
  o.scale = SizeScale::kSmall;
  return o;
}

TEST(Synth, ProgrammaticKeepsCountAndRecordsTasks) {
  TempDir d;
  FakeJudge judge;
  SynthResult r = Synthesize(Options(d.path(), 6), &judge);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kept, 6);
  EXPECT_EQ(r.failure, SynthFailure::kNone);
  auto files = PyFiles(d.path());
  ASSERT_EQ(files.size(), 6u);
  auto manifest = ReadJsonl(d.path() + "/tasks.jsonl");
  ASSERT_EQ(manifest.size(), 6u);
  std::set<std::string> sigs;
  for (size_t i = 0; i < manifest.size(); ++i) {
    const std::string file = manifest[i]["file"];
    EXPECT_EQ(file.rfind(std::to_string(i + 1) + "_", 0), 0u) << file;
    EXPECT_EQ(file, std::to_string(i + 1) + "_" + manifest[i]["name"].get<std::string>() + ".py");
    EXPECT_TRUE(fs::exists(d.path() + "/" + file));
    EXPECT_EQ(manifest[i]["origin"], "programmatic");
    sigs.insert(manifest[i]["signature"].get<std::string>());
  }
  EXPECT_EQ(sigs.size(), 6u);
  // No staging left behind; no rejections.
  for (const auto& e : fs::directory_iterator(d.path())) EXPECT_FALSE(e.is_directory()) << e.path();
  EXPECT_FALSE(fs::exists(d.path() + "/rejected.jsonl"));
}

TEST(Synth, SecondRunAddsNewTasksAndRejectsDuplicates) {
  TempDir d;
  FakeJudge judge;
  ASSERT_TRUE(Synthesize(Options(d.path(), 4, 5), &judge).status.ok());
  // The same seed proposes the same tasks again: all duplicates.
  SynthOptions same = Options(d.path(), 2, 5);
  same.max_attempts = 4;
  SynthResult r = Synthesize(same, &judge);
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.failure, SynthFailure::kNone);
  EXPECT_NE(r.status.message().find("attempt budget (4) is spent"), std::string::npos) << r.status.message();
  EXPECT_EQ(r.kept, 0);
  EXPECT_EQ(r.rejections["duplicate_source"], 4);
  auto rejected = ReadJsonl(d.path() + "/rejected.jsonl");
  ASSERT_EQ(rejected.size(), 4u);
  EXPECT_EQ(rejected[0]["stage"], "duplicate_source");
  EXPECT_NE(rejected[0]["reason"].get<std::string>().find("same normalised source as 1_"), std::string::npos);
  // Another seed adds tasks numbered after the existing ones.
  SynthResult more = Synthesize(Options(d.path(), 3, 6), &judge);
  ASSERT_TRUE(more.status.ok()) << more.status.message();
  EXPECT_EQ(PyFiles(d.path()).size(), 7u);
  EXPECT_EQ(fs::path(more.files[0]).filename().string().rfind("5_", 0), 0u);
  EXPECT_EQ(ReadJsonl(d.path() + "/tasks.jsonl").size(), 7u);
}

TEST(Synth, BrokenEnvironmentStopsBeforeAnyCandidate) {
  TempDir d;
  FakeJudge judge;
  judge.broken = true;
  ScriptedLlm llm;
  llm.script.push_back({Fenced(LlmTask("torch.relu"))});
  SynthOptions o = Options(d.path(), 2);
  o.llm = &llm;
  o.examples_dir = std::string(ADAEXPLORE_SOURCE_DIR) + "/examples/tasks";
  SynthResult r = Synthesize(o, &judge);
  EXPECT_EQ(r.failure, SynthFailure::kEnvironment);
  EXPECT_NE(r.status.message().find("No module named 'torch'"), std::string::npos) << r.status.message();
  EXPECT_TRUE(llm.prompts.empty());  // no LLM call paid for a broken judge
  EXPECT_EQ(r.attempts, 0);
}

TEST(Synth, LlmPathGateWithFakeJudge) {
  TempDir d;
  FakeJudge judge;
  ScriptedLlm llm;
  const std::string good = LlmTask("torch.relu");
  llm.script = {
      {Fenced(good)},                                                         // kept
      {"I cannot help with that."},                                           // extract
      {"", llm::ErrorKind::kTimeout},                                         // llm (transient)
      {Fenced(LlmTask("torch.tanh", 64, "        # FAIL_ME\n"))},             // invalid
      {Fenced(LlmTask("torch.sigmoid", 64, "        # DEGENERATE_ME\n"))},    // degenerate
      {Fenced(LlmTask("torch.gelu", 64, "        # HUGE_ME\n"))},             // too_large
      {Fenced("# same task, other sizes\n" + LlmTask("torch.relu", 256))},    // duplicate_source
      {Fenced(LlmTask("torch.nn.functional.relu"))},                          // duplicate_signature
      {Fenced(LlmTask("torch.relu").replace(0, 0, "import triton\n"))},       // not_plain_pytorch
      {Fenced(LlmTask("torch.nn.functional.silu"))},                          // kept
  };
  SynthOptions o = Options(d.path(), 2, 3);
  o.llm = &llm;
  o.examples_dir = std::string(ADAEXPLORE_SOURCE_DIR) + "/examples/tasks";
  SynthResult r = Synthesize(o, &judge);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kept, 2);
  EXPECT_EQ(r.attempts, 10);
  EXPECT_EQ(PyFiles(d.path()), (std::vector<std::string>{"1_Linear_ReLU_Multiply.py", "2_Linear_SiLU_Multiply.py"}));
  EXPECT_EQ(*ReadFile(d.path() + "/1_Linear_ReLU_Multiply.py"), good);
  auto rejected = ReadJsonl(d.path() + "/rejected.jsonl");
  std::vector<std::string> stages;
  for (const auto& j : rejected) stages.push_back(j["stage"]);
  EXPECT_EQ(stages, (std::vector<std::string>{"extract", "llm", "invalid", "degenerate", "too_large",
                                              "duplicate_source", "duplicate_signature", "not_plain_pytorch"}));
  EXPECT_EQ(rejected[2]["reason"], "reference forward failed: RuntimeError: boom");
  EXPECT_TRUE(rejected[2].contains("source"));
  EXPECT_EQ(rejected[3]["reason"], "input_independent");
  EXPECT_NE(rejected[4]["reason"].get<std::string>().find("4.00 GiB is over the limit of 512.0 MiB"), std::string::npos);
  EXPECT_NE(rejected[6]["reason"].get<std::string>().find("as 1_Linear_ReLU_Multiply.py"), std::string::npos);
  EXPECT_EQ(rejected[0]["attempt"], 2);
  EXPECT_EQ(rejected[1]["reason"].get<std::string>().rfind("timeout", 0), 0u);

  // The prompt: the template filled with an example, catalogue operators and,
  // once a task exists, the chains to avoid.
  ASSERT_EQ(llm.prompts.size(), 10u);
  EXPECT_NE(llm.prompts[0].find("### 1_BiasReLUScale.py"), std::string::npos);
  EXPECT_NE(llm.prompts[0].find("between 3 and 6 operators"), std::string::npos);
  EXPECT_NE(llm.prompts[0].find("Conv"), std::string::npos);
  EXPECT_EQ(llm.prompts[0].find("write a different one"), std::string::npos);
  EXPECT_NE(llm.prompts[1].find("- in[2] Linear>ReLU>Multiply out[2]"), std::string::npos) << llm.prompts[1];
}

TEST(Synth, FatalLlmErrorStops) {
  TempDir d;
  FakeJudge judge;
  ScriptedLlm llm;
  llm.script = {{"", llm::ErrorKind::kAuth}};
  SynthOptions o = Options(d.path(), 3);
  o.llm = &llm;
  o.examples_dir = std::string(ADAEXPLORE_SOURCE_DIR) + "/examples/tasks";
  SynthResult r = Synthesize(o, &judge);
  EXPECT_EQ(r.failure, SynthFailure::kLlm);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(ReadJsonl(d.path() + "/rejected.jsonl").size(), 1u);
}

TEST(Synth, BadOptions) {
  FakeJudge judge;
  SynthOptions o = Options("", 1);
  EXPECT_EQ(Synthesize(o, &judge).failure, SynthFailure::kUsage);
  TempDir d;
  ScriptedLlm llm;
  o = Options(d.path(), 1);
  o.llm = &llm;
  o.examples_dir = d.path();  // no tasks in it
  SynthResult r = Synthesize(o, &judge);
  EXPECT_EQ(r.failure, SynthFailure::kUsage);
  EXPECT_NE(r.status.message().find("no KernelBench task files"), std::string::npos);
}

// ---- with the real judge (CPU) ----

TEST(SynthReal, ComposedTasksPassTheTaskLoader) {
  SKIP_WITHOUT_TORCH(python);
  auto judge = CpuJudge(python);
  JudgeOptions opts;
  opts.device = "cpu";
  int checked = 0;
  for (uint64_t seed : {1, 2, 3, 4}) {
    Composer c(SizeScale::kSmall, seed);
    for (int i = 0; i < 6; ++i) {
      ComposedTask t;
      ASSERT_TRUE(c.Next(&t).ok());
      TempDir d;
      std::string path = d.path() + "/" + t.name + ".py";
      ASSERT_TRUE(WriteFile(path, t.source));
      TaskRef ref;
      ASSERT_TRUE(ReadTask(path, &ref).ok());
      TaskInfo info;
      Status s = judge->CheckTask(ref, opts, &info);
      ASSERT_TRUE(s.ok() && info.ok) << s.message() << " " << info.error << "\n" << t.source;
      EXPECT_TRUE(info.degenerate.empty()) << info.degenerate[0] << "\n" << t.source;
      // The judge's output shape is the composer's.
      auto outs = json::parse(info.outputs_json);
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_EQ(outs[0]["shape"].get<Shape>(), t.shapes.back()) << t.source;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24);
}

TEST(SynthReal, LlmPathKeepsValidAndRejectsBrokenDegenerateDuplicate) {
  SKIP_WITHOUT_TORCH(python);
  auto judge = CpuJudge(python);
  TempDir d;
  ScriptedLlm llm;
  const std::string degenerate =
      "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
      "    def __init__(self, features):\n        super(Model, self).__init__()\n"
      "        self.norm = nn.LayerNorm(features)\n\n"
      "    def forward(self, x):\n        x = self.norm(x)\n        return torch.mean(x, dim=1)\n\n\n"
      "batch_size = 8\nfeatures = 32\n\n\ndef get_inputs():\n    return [torch.randn(batch_size, features)]\n\n\n"
      "def get_init_inputs():\n    return [features]\n";
  const std::string broken = LlmTask("torch.relu").replace(LlmTask("torch.relu").find("x = torch.relu(x)"), 17,
                                                           "x = torch.relu(x).view(3, -1, 7)");
  llm.script = {
      {Fenced(LlmTask("torch.relu"))},
      {Fenced(broken)},
      {Fenced(degenerate)},
      {Fenced("# again\n" + LlmTask("torch.relu", 32))},
      {Fenced(LlmTask("torch.tanh"))},
  };
  SynthOptions o = Options(d.path(), 2, 9);
  o.llm = &llm;
  o.judge.device = "cpu";
  o.examples_dir = std::string(ADAEXPLORE_SOURCE_DIR) + "/examples/tasks";
  SynthResult r = Synthesize(o, judge);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(PyFiles(d.path()), (std::vector<std::string>{"1_Linear_ReLU_Multiply.py", "2_Linear_Tanh_Multiply.py"}));
  auto rejected = ReadJsonl(d.path() + "/rejected.jsonl");
  ASSERT_EQ(rejected.size(), 3u);
  EXPECT_EQ(rejected[0]["stage"], "invalid");
  EXPECT_NE(rejected[0]["reason"].get<std::string>().find("reference forward failed"), std::string::npos)
      << rejected[0]["reason"];
  EXPECT_EQ(rejected[1]["stage"], "degenerate");
  EXPECT_NE(rejected[1]["reason"].get<std::string>().find("zero_output_passes"), std::string::npos);
  EXPECT_EQ(rejected[2]["stage"], "duplicate_source");
  auto manifest = ReadJsonl(d.path() + "/tasks.jsonl");
  ASSERT_EQ(manifest.size(), 2u);
  EXPECT_EQ(manifest[0]["outputs"][0]["shape"], json::array({8, 16}));
}

TEST(SynthReal, ProgrammaticRunKeepsEverythingItComposes) {
  SKIP_WITHOUT_TORCH(python);
  auto judge = CpuJudge(python);
  for (uint64_t seed : {11, 12}) {
    TempDir d;
    SynthOptions o = Options(d.path(), 4, seed);
    o.judge.device = "cpu";
    SynthResult r = Synthesize(o, judge);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.kept, 4);
    EXPECT_EQ(r.rejected, 0) << *ReadFile(d.path() + "/rejected.jsonl");
  }
}

}  // namespace
}  // namespace ax::adapt
