#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "judge/protocol.h"

namespace ax {
namespace {

Tolerance MustLookup(const std::string& name) {
  Tolerance t{};
  Status s = LookupTolerance(name, &t);
  EXPECT_TRUE(s.ok()) << name << ": " << s.message();
  return t;
}

TEST(ToleranceTest, StrictPreset) {
  Tolerance t = MustLookup("strict");
  EXPECT_EQ(t.name, "strict");
  EXPECT_DOUBLE_EQ(t.fp32_atol, 1e-4);
  EXPECT_DOUBLE_EQ(t.fp32_rtol, 1e-4);
  EXPECT_DOUBLE_EQ(t.half_atol, 1e-2);
  EXPECT_DOUBLE_EQ(t.half_rtol, 1e-2);
}

TEST(ToleranceTest, KernelBenchPreset) {
  Tolerance t = MustLookup("kernelbench-v0.1");
  EXPECT_EQ(t.name, "kernelbench-v0.1");
  EXPECT_DOUBLE_EQ(t.fp32_atol, 1e-2);
  EXPECT_DOUBLE_EQ(t.fp32_rtol, 1e-2);
  EXPECT_DOUBLE_EQ(t.half_atol, 1e-2);
  EXPECT_DOUBLE_EQ(t.half_rtol, 1e-2);
}

TEST(ToleranceTest, AdaExplorePreset) {
  Tolerance t = MustLookup("adaexplore");
  EXPECT_EQ(t.name, "adaexplore");
  EXPECT_DOUBLE_EQ(t.fp32_atol, 5e-2);
  EXPECT_DOUBLE_EQ(t.fp32_rtol, 5e-2);
  EXPECT_DOUBLE_EQ(t.half_atol, 5e-2);
  EXPECT_DOUBLE_EQ(t.half_rtol, 5e-2);
}

TEST(ToleranceTest, UnknownNameIsAnErrorListingTheChoices) {
  Tolerance t{};
  t.name = "untouched";
  Status s = LookupTolerance("loose", &t);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "unknown tolerance 'loose' (strict, kernelbench-v0.1, adaexplore)");
  EXPECT_EQ(t.name, "untouched");  // output left alone on error
  for (const char* bad : {"", "Strict", "strict ", "kernelbench", "adaexplore\n"}) {
    EXPECT_FALSE(LookupTolerance(bad, &t).ok()) << "'" << bad << "'";
  }
}

TEST(ToleranceTest, NamesListMatchesPresets) {
  const auto& names = ToleranceNames();
  EXPECT_EQ(names, (std::vector<std::string>{"strict", "kernelbench-v0.1", "adaexplore"}));
  for (const auto& n : names) {
    Tolerance t{};
    ASSERT_TRUE(LookupTolerance(n, &t).ok()) << n;
    EXPECT_EQ(t.name, n);
  }
}

TEST(ToleranceTest, WorkerJson) {
  Tolerance t = MustLookup("strict");
  nlohmann::json j = t.ToWorkerJson();
  ASSERT_TRUE(j.is_object());
  std::set<std::string> keys;
  for (auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"float32", "float64", "float16", "bfloat16", "default"}));
  EXPECT_EQ(j["float32"], nlohmann::json::array({1e-4, 1e-4}));
  EXPECT_EQ(j["float64"], nlohmann::json::array({1e-4, 1e-4}));
  EXPECT_EQ(j["default"], nlohmann::json::array({1e-4, 1e-4}));
  EXPECT_EQ(j["float16"], nlohmann::json::array({1e-2, 1e-2}));
  EXPECT_EQ(j["bfloat16"], nlohmann::json::array({1e-2, 1e-2}));
}

// ---------------------------------------------------------------- JudgeOptions

TEST(JudgeOptionsTest, DefaultsAreCpuStrict) {
  JudgeOptions o;
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.tolerance, "strict");
  EXPECT_FALSE(o.cuda());
  EXPECT_FALSE(o.seed.has_value());
  EXPECT_TRUE(o.use_cache);
}

TEST(JudgeOptionsTest, CudaDetection) {
  JudgeOptions o;
  for (const char* d : {"cuda", "cuda:0", "cuda:3"}) {
    o.device = d;
    EXPECT_TRUE(o.cuda()) << d;
  }
  for (const char* d : {"cpu", "", "CUDA:0", "gpu"}) {
    o.device = d;
    EXPECT_FALSE(o.cuda()) << d;
  }
}

TEST(JudgeOptionsTest, ResolvedCpuDefaults) {
  JudgeOptions o;
  o.device = "cpu";
  JudgeOptions r = o.Resolved();
  EXPECT_EQ(r.warmup, 2);
  EXPECT_EQ(r.iters, 5);
  EXPECT_EQ(r.flush_bytes, 0);
  EXPECT_EQ(r.baselines, (std::vector<std::string>{"eager"}));
  EXPECT_EQ(r.trials, 5);
  EXPECT_EQ(r.input_sets, 3);
  // The original is untouched.
  EXPECT_EQ(o.warmup, -1);
  EXPECT_EQ(o.iters, -1);
  EXPECT_EQ(o.flush_bytes, -1);
  EXPECT_TRUE(o.baselines.empty());
}

TEST(JudgeOptionsTest, ResolvedCudaDefaults) {
  JudgeOptions o;
  o.device = "cuda:0";
  JudgeOptions r = o.Resolved();
  EXPECT_EQ(r.warmup, 10);
  EXPECT_EQ(r.iters, 50);
  EXPECT_EQ(r.flush_bytes, 256LL << 20);
  EXPECT_EQ(r.baselines, (std::vector<std::string>{"eager", "compile"}));
}

TEST(JudgeOptionsTest, ResolvedKeepsExplicitValues) {
  JudgeOptions o;
  o.device = "cuda:1";
  o.warmup = 0;
  o.iters = 7;
  o.flush_bytes = 0;
  o.baselines = {"compile"};
  JudgeOptions r = o.Resolved();
  EXPECT_EQ(r.warmup, 0);
  EXPECT_EQ(r.iters, 7);
  EXPECT_EQ(r.flush_bytes, 0);
  EXPECT_EQ(r.baselines, (std::vector<std::string>{"compile"}));
  // Idempotent.
  JudgeOptions rr = r.Resolved();
  EXPECT_EQ(rr.ProtocolJson(), r.ProtocolJson());
}

TEST(JudgeOptionsTest, NoneBaselinesResolveToEmpty) {
  for (const char* dev : {"cpu", "cuda:0"}) {
    JudgeOptions o;
    o.device = dev;
    o.baselines = {"none"};
    EXPECT_TRUE(o.Resolved().baselines.empty()) << dev;
    EXPECT_EQ(o.ProtocolJson()["baselines"], nlohmann::json::array()) << dev;
  }
}

TEST(JudgeOptionsTest, ResolvedClampsCounts) {
  JudgeOptions o;
  o.trials = 0;
  o.input_sets = -4;
  JudgeOptions r = o.Resolved();
  EXPECT_EQ(r.trials, 1);
  EXPECT_EQ(r.input_sets, 1);
}

TEST(JudgeOptionsTest, ProtocolJsonContents) {
  JudgeOptions o;
  o.tolerance = "adaexplore";
  o.trials = 3;
  o.recheck_trials = 4;
  nlohmann::json j = o.ProtocolJson();
  EXPECT_EQ(j["tolerance"], "adaexplore");
  EXPECT_EQ(j["trials"], 3);
  EXPECT_EQ(j["recheck"], 4);
  EXPECT_EQ(j["time"], true);
  EXPECT_EQ(j["warmup"], 2);  // resolved, not -1
  EXPECT_EQ(j["iters"], 5);
  EXPECT_EQ(j["input_sets"], 3);
  EXPECT_EQ(j["flush_bytes"], 0);
  EXPECT_EQ(j["baselines"], nlohmann::json::array({"eager"}));
  EXPECT_EQ(j["init_seed"], 42);
  EXPECT_EQ(j["judge"], kJudgeRevision);  // verdicts of an earlier judge are not served
  EXPECT_FALSE(j.contains("seed"));
}

TEST(JudgeOptionsTest, ProtocolJsonIncludesSeedOnlyWhenFixed) {
  JudgeOptions a;
  EXPECT_FALSE(a.ProtocolJson().contains("seed"));
  JudgeOptions b = a;
  b.seed = 1234567890123ULL;
  nlohmann::json jb = b.ProtocolJson();
  ASSERT_TRUE(jb.contains("seed"));
  EXPECT_EQ(jb["seed"].get<unsigned long long>(), 1234567890123ULL);
  JudgeOptions c = a;
  c.seed = 0;  // zero is a fixed seed too
  ASSERT_TRUE(c.ProtocolJson().contains("seed"));
  EXPECT_EQ(c.ProtocolJson()["seed"], 0);
  EXPECT_NE(a.ProtocolJson(), jb);
  EXPECT_NE(jb, c.ProtocolJson());
}

TEST(JudgeOptionsTest, ProtocolJsonIsStableAndSensitive) {
  JudgeOptions a, b;
  EXPECT_EQ(a.ProtocolJson().dump(), b.ProtocolJson().dump());
  // Explicit defaults are the same protocol as implicit ones.
  b.warmup = 2;
  b.iters = 5;
  b.flush_bytes = 0;
  b.baselines = {"eager"};
  EXPECT_EQ(a.ProtocolJson(), b.ProtocolJson());
  // Settings that do not change judging are not part of the key.
  b.use_cache = false;
  b.compile_timeout_s = 1;
  b.run_timeout_s = 2;
  EXPECT_EQ(a.ProtocolJson(), b.ProtocolJson());
  // Settings that do change it are.
  auto differs = [&](auto mutate) {
    JudgeOptions c;
    mutate(c);
    return c.ProtocolJson() != a.ProtocolJson();
  };
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.tolerance = "adaexplore"; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.trials = 6; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.time = false; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.iters = 6; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.init_seed = 1; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.baselines = {"none"}; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.device = "cuda:0"; }));  // via the resolved defaults
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.precision = Precision::kBf16; }));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.precision = Precision::kFp16; }));
  // fp32 writes no precision: verdicts cached before the option keep their keys.
  EXPECT_FALSE(a.ProtocolJson().contains("precision"));
  EXPECT_TRUE(differs([](JudgeOptions& c) { c.timing = TimingMode::kGpu; }));
  EXPECT_FALSE(a.ProtocolJson().contains("timing"));  // likewise host timing
}

TEST(Protocol, TimingMode) {
  TimingMode m = TimingMode::kHost;
  ASSERT_TRUE(ParseTimingMode("gpu", &m).ok());
  EXPECT_EQ(m, TimingMode::kGpu);
  ASSERT_TRUE(ParseTimingMode("host", &m).ok());
  EXPECT_EQ(m, TimingMode::kHost);
  Status s = ParseTimingMode("wall", &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("wall"), std::string::npos);
  EXPECT_STREQ(TimingModeName(TimingMode::kGpu), "gpu");
}

TEST(Protocol, Precision) {
  Precision p = Precision::kFp32;
  ASSERT_TRUE(ParsePrecision("bf16", &p).ok());
  EXPECT_EQ(p, Precision::kBf16);
  ASSERT_TRUE(ParsePrecision("float16", &p).ok());
  EXPECT_EQ(p, Precision::kFp16);
  ASSERT_TRUE(ParsePrecision("fp32", &p).ok());
  EXPECT_EQ(p, Precision::kFp32);
  Status s = ParsePrecision("fp8", &p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("fp8"), std::string::npos);
  EXPECT_STREQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_EQ(WorkerTaskKey("abc", Precision::kFp32), "abc");
  EXPECT_EQ(WorkerTaskKey("abc", Precision::kFp16), "abc:fp16");
  EXPECT_NE(WorkerTaskKey("abc", Precision::kFp16), WorkerTaskKey("abc", Precision::kBf16));
}

}  // namespace
}  // namespace ax
