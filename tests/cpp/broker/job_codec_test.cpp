#include "broker/job_codec.h"

#include <gtest/gtest.h>

#include "broker/keys.h"
#include "common/util.h"

using nlohmann::json;

namespace ax::broker {

namespace {
Job SampleJob() {
  Job j;
  j.id = RandomId();
  j.kind = JobKind::kEval;
  j.req.task.name = "1_Relu";
  j.req.task.path = "/t/1_Relu.py";
  j.req.task.source = "class Model: pass\n";
  j.req.task.hash = "forged";
  j.req.candidate_source = "class ModelNew: pass\n";
  j.req.candidate_path = "cand.py";
  j.req.options.device = "cuda";
  j.req.options.trials = 7;
  j.req.options.seed = 99;
  j.req.options.baselines = {"eager"};
  return j;
}
}  // namespace

TEST(JobCodec, RoundTripRecomputesTheTaskHash) {
  Job in = SampleJob();
  Job out;
  ASSERT_TRUE(DecodeJob(EncodeJob(in), kMaxJobBytes, &out).ok());
  EXPECT_EQ(out.id, in.id);
  EXPECT_EQ(out.req.task.source, in.req.task.source);
  EXPECT_EQ(out.req.task.hash, Sha256Hex(in.req.task.source));
  EXPECT_EQ(out.req.candidate_source, in.req.candidate_source);
  EXPECT_EQ(out.req.options.trials, 7);
  EXPECT_EQ(*out.req.options.seed, 99u);
  EXPECT_EQ(out.req.options.baselines, std::vector<std::string>{"eager"});
  EXPECT_EQ(out.req.options.ProtocolJson(), in.req.options.ProtocolJson());
}

TEST(JobCodec, PrecisionTravelsAndOldJobsMeanFp32) {
  Job in = SampleJob();
  in.req.options.precision = Precision::kBf16;
  Job out;
  ASSERT_TRUE(DecodeJob(EncodeJob(in), kMaxJobBytes, &out).ok());
  EXPECT_EQ(out.req.options.precision, Precision::kBf16);
  EXPECT_EQ(out.req.options.ProtocolJson(), in.req.options.ProtocolJson());
  // A job from a client that knows no precision is fp32; an unknown one is refused.
  json j = json::parse(EncodeJob(SampleJob()));
  ASSERT_TRUE(j["options"].contains("precision"));
  j["options"].erase("precision");
  ASSERT_TRUE(DecodeJob(j.dump(), kMaxJobBytes, &out).ok());
  EXPECT_EQ(out.req.options.precision, Precision::kFp32);
  j["options"]["precision"] = "fp8";
  Status s = DecodeJob(j.dump(), kMaxJobBytes, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("precision"), std::string::npos);
}

TEST(JobCodec, TimingTravelsAndOldJobsMeanHost) {
  Job in = SampleJob();
  in.req.options.timing = TimingMode::kGpu;
  Job out;
  ASSERT_TRUE(DecodeJob(EncodeJob(in), kMaxJobBytes, &out).ok());
  EXPECT_EQ(out.req.options.timing, TimingMode::kGpu);
  EXPECT_EQ(out.req.options.ProtocolJson(), in.req.options.ProtocolJson());
  json j = json::parse(EncodeJob(SampleJob()));
  j["options"].erase("timing");
  ASSERT_TRUE(DecodeJob(j.dump(), kMaxJobBytes, &out).ok());
  EXPECT_EQ(out.req.options.timing, TimingMode::kHost);
  j["options"]["timing"] = "wall";
  Status s = DecodeJob(j.dump(), kMaxJobBytes, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("timing"), std::string::npos);
}

TEST(JobCodec, MalformedJobsAreInvalidInputNotCrashes) {
  Job out;
  const std::string good = EncodeJob(SampleJob());
  std::vector<std::string> bad = {"", "not json", "[]", "{\"v\": 2}", good.substr(0, good.size() / 2)};
  for (auto mutate : std::vector<std::function<void(json&)>>{
           [](json& j) { j["kind"] = "rm -rf"; },
           [](json& j) { j["id"] = "../../etc"; },
           [](json& j) { j["task"]["source"] = 5; },
           [](json& j) { j["task"]["source"] = ""; },
           [](json& j) { j.erase("candidate"); },
           [](json& j) { j["options"]["trials"] = 0; },
           [](json& j) { j["options"]["trials"] = "five"; },
           [](json& j) { j["options"]["tolerance"] = "loose"; },
           [](json& j) { j["options"]["baselines"] = {"rm"}; },
           [](json& j) { j["options"]["run_timeout_s"] = -1; },
       }) {
    json j = json::parse(good);
    mutate(j);
    bad.push_back(j.dump());
  }
  for (const auto& b : bad) {
    Status s = DecodeJob(b, kMaxJobBytes, &out);
    EXPECT_FALSE(s.ok()) << b.substr(0, 80);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  }
}

TEST(JobCodec, SizeCap) {
  Job j = SampleJob();
  j.req.candidate_source = std::string(2000, 'x');
  Job out;
  Status s = DecodeJob(EncodeJob(j), 1000, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("over the limit"), std::string::npos);
}

TEST(JobCodec, ResultsRoundTrip) {
  JobResult r;
  r.job_id = "abc";
  r.worker = "w1";
  r.verdict.status = kStatusOk;
  r.verdict.correct = true;
  r.verdict.device_index = 1;
  r.verdict.speedup["eager"] = 1.5;
  r.judge_s = 2.5;
  JobResult back;
  ASSERT_TRUE(DecodeResult(EncodeResult(r), &back).ok());
  EXPECT_TRUE(back.status.ok());
  EXPECT_EQ(back.verdict.status, kStatusOk);
  EXPECT_EQ(back.verdict.device_index, 1);
  EXPECT_DOUBLE_EQ(back.verdict.speedup["eager"], 1.5);
  EXPECT_DOUBLE_EQ(back.judge_s, 2.5);

  JobResult err;
  err.job_id = "def";
  err.status = Status::Error(StatusCode::kInvalidInput, "malformed job: x");
  err.bad_input = true;
  err.info.error = "task failed";
  ASSERT_TRUE(DecodeResult(EncodeResult(err), &back).ok());
  EXPECT_FALSE(back.status.ok());
  EXPECT_EQ(back.status.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(back.bad_input);
  EXPECT_EQ(back.info.error, "task failed");
}

TEST(Keys, ModelSlugAndNames) {
  EXPECT_EQ(ModelSlug("NVIDIA H200"), "nvidia-h200");
  EXPECT_EQ(ModelSlug("NVIDIA GeForce RTX 4090 "), "nvidia-geforce-rtx-4090");
  EXPECT_EQ(ModelSlug("cpu"), "cpu");
  EXPECT_TRUE(SafeName(RandomId()));
  EXPECT_NE(RandomId(), RandomId());
  EXPECT_FALSE(SafeName("a b"));
  EXPECT_FALSE(SafeName("../x"));
  EXPECT_FALSE(SafeName(""));
}

}  // namespace ax::broker
