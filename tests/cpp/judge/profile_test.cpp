// Tests of the verdict's profile: the kernels' shares, the roofline against
// the device's measured peaks, the one-line summary, and its JSON round trip
// (in the verdict too).
#include <gtest/gtest.h>

#include "judge/profile.h"
#include "judge/verdict.h"

namespace ax {
namespace {

using json = nlohmann::json;

const json kTimes = json::parse(R"([
  {"name": "void at::native::vectorized_elementwise_kernel<4>", "ms": 0.25, "launches": 2},
  {"name": "_fused_gelu", "ms": 0.75, "launches": 1}
])");

DeviceFacts H200ish() {
  DeviceFacts f;
  f.name = "NVIDIA H200";
  f.sms = 132;
  f.memory_bytes = 150'000'000'000;
  f.copy_gbps = 4000;
  f.fp32_tflops = 50;
  return f;
}

TEST(ProfileTest, SharesAreOfTheKernelsSumLongestFirst) {
  TaskInfo task;
  Profile p = MakeProfile(kTimes, task, nullptr);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(p.busy_ms, 1.0);
  EXPECT_EQ(p.kernels[0].name, "_fused_gelu");
  EXPECT_DOUBLE_EQ(p.kernels[0].share, 0.75);
  EXPECT_DOUBLE_EQ(p.kernels[1].share, 0.25);
  EXPECT_EQ(p.kernels[1].launches, 2);
  EXPECT_FALSE(p.roofline) << "no device facts, no task bytes: no roofline";
  EXPECT_EQ(p.Summary(), "2 kernels; `_fused_gelu` 75% of 1 ms");
}

TEST(ProfileTest, MemoryBoundTaskAgainstCopyBandwidth) {
  TaskInfo task;
  task.min_bytes = 2'000'000'000;  // 2 GB in 1 ms: 2 TB/s, half the copy bandwidth
  task.flops = 1e9;                // 0.5 FLOP per byte: far below the ridge (12.5)
  DeviceFacts f = H200ish();
  Profile p = MakeProfile(kTimes, task, &f);
  ASSERT_TRUE(p.roofline);
  EXPECT_NEAR(p.roofline->gbps, 2000, 1e-6);
  EXPECT_NEAR(p.roofline->bandwidth_fraction, 0.5, 1e-9);
  EXPECT_EQ(p.roofline->bound, "memory");
  EXPECT_EQ(p.Summary(), "2 kernels; `_fused_gelu` 75% of 1 ms; 50% of copy bandwidth (memory-bound)");
}

TEST(ProfileTest, ComputeBoundTaskAgainstTheMatmulRate) {
  TaskInfo task;
  task.min_bytes = 100'000'000;
  task.flops = 40e9;  // 400 FLOP per byte; 40 TFLOP/s in 1 ms: 80% of 50
  DeviceFacts f = H200ish();
  Profile p = MakeProfile(kTimes, task, &f);
  ASSERT_TRUE(p.roofline);
  EXPECT_EQ(p.roofline->bound, "compute");
  EXPECT_NEAR(p.roofline->flops_fraction, 0.8, 1e-9);
  EXPECT_EQ(p.Summary(), "2 kernels; `_fused_gelu` 75% of 1 ms; 80% of fp32-accurate matmul FLOP/s (compute-bound)");
}

TEST(ProfileTest, TensorCoresRaiseTheAccuratePeakToAThirdOfTF32) {
  TaskInfo task;
  task.min_bytes = 100'000'000;
  task.flops = 90e9;  // 90 TFLOP/s in 1 ms: above plain fp32 (50), 75% of 360 / 3
  DeviceFacts f = H200ish();
  f.tf32_tflops = 360;
  EXPECT_DOUBLE_EQ(f.AccurateTflops(), 120);
  Profile p = MakeProfile(kTimes, task, &f);
  ASSERT_TRUE(p.roofline);
  EXPECT_DOUBLE_EQ(p.roofline->peak_tflops, 120);
  EXPECT_NEAR(p.roofline->flops_fraction, 0.75, 1e-9);
  f.tf32_tflops = 90;  // a third of it is below plain fp32: fp32 stays the peak
  EXPECT_DOUBLE_EQ(f.AccurateTflops(), 50);
  DeviceFacts back;
  f.tf32_tflops = 360;
  ASSERT_TRUE(DeviceFacts::FromJson(f.ToJson(), &back));
  EXPECT_DOUBLE_EQ(back.tf32_tflops, 360);
}

TEST(ProfileTest, MalformedEntriesAreSkipped) {
  json times = json::parse(R"([{"name": "a", "ms": "x"}, 3, {"name": "b", "ms": -1}, {"name": "c", "ms": 0.5}])");
  Profile p = MakeProfile(times, TaskInfo{}, nullptr);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].name, "c");
  EXPECT_DOUBLE_EQ(p.kernels[0].share, 1.0);
  EXPECT_TRUE(MakeProfile(json::object(), TaskInfo{}, nullptr).kernels.empty());
  EXPECT_EQ(Profile{}.Summary(), "");
}

TEST(ProfileTest, JsonRoundTripInTheVerdict) {
  TaskInfo task;
  task.min_bytes = 2'000'000'000;
  task.flops = 0;
  DeviceFacts f = H200ish();
  Verdict v;
  v.status = kStatusOk;
  v.correct = true;
  v.profile = MakeProfile(kTimes, task, &f);
  Verdict back = Verdict::FromJson(v.ToJson());
  ASSERT_TRUE(back.profile);
  EXPECT_EQ(back.profile->ToJson(), v.profile->ToJson());
  EXPECT_EQ(back.profile->Summary(), v.profile->Summary());
  EXPECT_NE(v.ToText().find("profile: 2 kernels"), std::string::npos) << v.ToText();
  EXPECT_FALSE(Verdict::FromJson(Verdict{}.ToJson()).profile);
}

TEST(DeviceFactsTest, DescribeAndRoundTrip) {
  DeviceFacts f = H200ish();
  EXPECT_EQ(f.Describe(), "NVIDIA H200 (132 SMs, 150 GB, measured copy bandwidth 4.00 TB/s, fp32 matmul 50 TFLOP/s)");
  DeviceFacts back;
  ASSERT_TRUE(DeviceFacts::FromJson(f.ToJson(), &back));
  EXPECT_EQ(back.Describe(), f.Describe());
  EXPECT_FALSE(DeviceFacts::FromJson(json::array(), &back));
  f.copy_gbps = 12.5;
  EXPECT_NE(f.Describe().find("12.5 GB/s"), std::string::npos);
}

TEST(DeviceFactsTest, HardwareLineForThePrompts) {
  DeviceFacts f = H200ish();
  EXPECT_EQ(HardwareLine(true, &f),
            "an NVIDIA H200 (132 SMs, 150 GB, measured copy bandwidth 4.00 TB/s, fp32 matmul 50 TFLOP/s)");
  EXPECT_EQ(HardwareLine(true, nullptr), "an NVIDIA GPU");
  DeviceFacts nameless;
  EXPECT_EQ(HardwareLine(true, &nameless), "an NVIDIA GPU");
  // The CPU line does not depend on the machine, so recordings replay anywhere.
  EXPECT_EQ(HardwareLine(false, &f), "the CPU (Triton's interpreter; timings are CPU figures)");
}

}  // namespace
}  // namespace ax
