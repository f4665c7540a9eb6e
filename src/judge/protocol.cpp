#include "judge/protocol.h"

#include <algorithm>

namespace ax {

namespace {
const Tolerance kPresets[] = {
    // Strict: fp32 1e-4; fp16/bf16 1e-2; TF32 is off on both sides.
    {"strict", 1e-4, 1e-4, 1e-2, 1e-2},
    // KernelBench v0.1's single tolerance.
    {"kernelbench-v0.1", 1e-2, 1e-2, 1e-2, 1e-2},
    // The AdaExplore paper's correctness gate.
    {"adaexplore", 5e-2, 5e-2, 5e-2, 5e-2},
};
}  // namespace

nlohmann::json Tolerance::ToWorkerJson() const {
  return {{"float32", {fp32_atol, fp32_rtol}}, {"float64", {fp32_atol, fp32_rtol}},
          {"float16", {half_atol, half_rtol}}, {"bfloat16", {half_atol, half_rtol}},
          {"default", {fp32_atol, fp32_rtol}}};
}

const std::vector<std::string>& ToleranceNames() {
  static const std::vector<std::string> names = {"strict", "kernelbench-v0.1", "adaexplore"};
  return names;
}

Status LookupTolerance(const std::string& name, Tolerance* out) {
  for (const auto& t : kPresets) {
    if (t.name == name) {
      *out = t;
      return Status::Ok();
    }
  }
  return Status::Error("unknown tolerance '" + name + "' (strict, kernelbench-v0.1, adaexplore)");
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp32: break;
  }
  return "fp32";
}

Status ParsePrecision(const std::string& name, Precision* out) {
  if (name == "fp32" || name == "float32") {
    *out = Precision::kFp32;
  } else if (name == "fp16" || name == "float16") {
    *out = Precision::kFp16;
  } else if (name == "bf16" || name == "bfloat16") {
    *out = Precision::kBf16;
  } else {
    return Status::Error(StatusCode::kInvalidInput, "unknown precision '" + name + "' (fp32, fp16 or bf16)");
  }
  return Status::Ok();
}

const char* TimingModeName(TimingMode m) { return m == TimingMode::kGpu ? "gpu" : "host"; }

Status ParseTimingMode(const std::string& name, TimingMode* out) {
  if (name == "host") {
    *out = TimingMode::kHost;
  } else if (name == "gpu") {
    *out = TimingMode::kGpu;
  } else {
    return Status::Error(StatusCode::kInvalidInput, "unknown timing '" + name + "' (host or gpu)");
  }
  return Status::Ok();
}

std::string WorkerTaskKey(const std::string& task_hash, Precision p) {
  return p == Precision::kFp32 ? task_hash : task_hash + ":" + PrecisionName(p);
}

JudgeOptions JudgeOptions::Resolved() const {
  JudgeOptions o = *this;
  bool gpu = cuda();
  if (o.warmup < 0) o.warmup = gpu ? 10 : 2;
  if (o.iters < 0) o.iters = gpu ? 50 : 5;
  if (o.flush_bytes < 0) o.flush_bytes = gpu ? (256LL << 20) : 0;
  if (o.baselines.empty()) {
    o.baselines = gpu ? std::vector<std::string>{"eager", "compile"} : std::vector<std::string>{"eager"};
  }
  // {"none"} asks for no baselines at all.
  o.baselines.erase(std::remove(o.baselines.begin(), o.baselines.end(), "none"), o.baselines.end());
  if (o.input_sets < 1) o.input_sets = 1;
  if (o.trials < 1) o.trials = 1;
  return o;
}

nlohmann::json JudgeOptions::ProtocolJson() const {
  JudgeOptions o = Resolved();
  nlohmann::json j = {{"tolerance", o.tolerance}, {"trials", o.trials}, {"time", o.time},
                      {"warmup", o.warmup},       {"iters", o.iters},   {"input_sets", o.input_sets},
                      {"flush_bytes", o.flush_bytes}, {"baselines", o.baselines},
                      {"init_seed", o.init_seed}, {"recheck", o.recheck_trials}, {"judge", kJudgeRevision}};
  if (o.seed) j["seed"] = *o.seed;
  // Only when not fp32, so that fp32 verdicts keep the cache keys they had.
  if (o.precision != Precision::kFp32) j["precision"] = PrecisionName(o.precision);
  // Likewise only when not the default: host-timed verdicts keep their keys.
  if (o.timing != TimingMode::kHost) j["timing"] = TimingModeName(o.timing);
  return j;
}

}  // namespace ax
