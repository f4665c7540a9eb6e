#include "judge/verdict.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ax {

nlohmann::json TimingSummary::ToJson() const {
  return {{"median_ms", median_ms}, {"p10_ms", p10_ms}, {"p90_ms", p90_ms}, {"min_ms", min_ms},
          {"max_ms", max_ms},       {"mean_ms", mean_ms}, {"stdev_ms", stdev_ms}, {"n", n}};
}

void Verdict::AddFlag(const std::string& f) {
  if (!HasFlag(f)) flags.push_back(f);
}

bool Verdict::HasFlag(const std::string& f) const {
  return std::find(flags.begin(), flags.end(), f) != flags.end();
}

nlohmann::json Verdict::ToJson() const {
  nlohmann::json j;
  j["status"] = status;
  j["correct"] = correct;
  j["flags"] = flags;
  j["error"] = error;
  j["max_abs_error"] = max_abs_error ? nlohmann::json(*max_abs_error) : nlohmann::json(nullptr);
  j["runtime_ms"] = runtime_ms ? nlohmann::json(*runtime_ms) : nlohmann::json(nullptr);
  j["timing"] = timing.n ? timing.ToJson() : nlohmann::json(nullptr);
  j["host_ms"] = host_ms ? nlohmann::json(*host_ms) : nlohmann::json(nullptr);
  if (gpu_span_ms) j["gpu_span_ms"] = *gpu_span_ms;
  if (gpu_busy_ms) j["gpu_busy_ms"] = *gpu_busy_ms;
  if (profile) j["profile"] = profile->ToJson();
  j["timing_source"] = timing_source;
  j["precision"] = precision;
  j["timing_mode"] = timing_mode;
  j["baseline_ms"] = baseline_ms;
  j["speedup"] = speedup;
  j["device"] = device;
  j["device_index"] = device_index;
  if (!worker.empty()) j["worker"] = worker;
  j["task"] = task;
  j["candidate"] = candidate;
  j["env"] = env;
  j["protocol"] = protocol;
  j["isolation"] = isolation;
  if (!output_transfer.empty()) j["output_transfer"] = output_transfer;
  j["output_tail"] = output_tail;
  j["judge_seconds"] = judge_seconds;
  j["phases"] = phases;
  j["cached"] = cached;
  return j;
}

Verdict Verdict::FromJson(const nlohmann::json& j) {
  Verdict v;
  v.status = j.value("status", "");
  v.correct = j.value("correct", false);
  v.flags = j.value("flags", std::vector<std::string>{});
  v.error = j.value("error", "");
  if (j.contains("max_abs_error") && j["max_abs_error"].is_number()) v.max_abs_error = j["max_abs_error"].get<double>();
  if (j.contains("runtime_ms") && j["runtime_ms"].is_number()) v.runtime_ms = j["runtime_ms"].get<double>();
  if (j.contains("host_ms") && j["host_ms"].is_number()) v.host_ms = j["host_ms"].get<double>();
  if (j.contains("gpu_span_ms") && j["gpu_span_ms"].is_number()) v.gpu_span_ms = j["gpu_span_ms"].get<double>();
  if (j.contains("gpu_busy_ms") && j["gpu_busy_ms"].is_number()) v.gpu_busy_ms = j["gpu_busy_ms"].get<double>();
  if (j.contains("profile") && j["profile"].is_object()) v.profile = Profile::FromJson(j["profile"]);
  if (j.contains("timing") && j["timing"].is_object()) {
    const auto& t = j["timing"];
    v.timing.median_ms = t.value("median_ms", 0.0);
    v.timing.p10_ms = t.value("p10_ms", 0.0);
    v.timing.p90_ms = t.value("p90_ms", 0.0);
    v.timing.min_ms = t.value("min_ms", 0.0);
    v.timing.max_ms = t.value("max_ms", 0.0);
    v.timing.mean_ms = t.value("mean_ms", 0.0);
    v.timing.stdev_ms = t.value("stdev_ms", 0.0);
    v.timing.n = t.value("n", 0);
  }
  v.timing_source = j.value("timing_source", "");
  v.precision = j.value("precision", "fp32");
  v.timing_mode = j.value("timing_mode", "host");
  v.baseline_ms = j.value("baseline_ms", std::map<std::string, double>{});
  v.speedup = j.value("speedup", std::map<std::string, double>{});
  v.device = j.value("device", "");
  v.device_index = j.value("device_index", -1);
  v.worker = j.value("worker", "");
  v.task = j.value("task", nlohmann::json::object());
  v.candidate = j.value("candidate", nlohmann::json::object());
  v.env = j.value("env", nlohmann::json::object());
  v.protocol = j.value("protocol", nlohmann::json::object());
  v.isolation = j.value("isolation", "");
  v.output_transfer = j.value("output_transfer", "");
  v.output_tail = j.value("output_tail", "");
  v.judge_seconds = j.value("judge_seconds", 0.0);
  if (j.contains("phases") && j["phases"].is_object()) v.phases = j["phases"].get<std::map<std::string, double>>();
  v.cached = j.value("cached", false);
  return v;
}

std::string Verdict::ToText() const {
  std::ostringstream o;
  char buf[256];
  o << "status: " << status << (correct ? " (correct)" : "") << "\n";
  if (precision != "fp32") o << "precision: " << precision << "\n";
  if (timing_mode != "host") o << "timing: " << timing_mode << " (launches hidden behind a queued spin)\n";
  if (!flags.empty()) {
    o << "flags: ";
    for (size_t i = 0; i < flags.size(); ++i) o << (i ? ", " : "") << flags[i];
    o << "\n";
  }
  if (max_abs_error) {
    std::snprintf(buf, sizeof buf, "max abs error: %.3g\n", *max_abs_error);
    o << buf;
  }
  if (runtime_ms) {
    std::snprintf(buf, sizeof buf, "runtime: %.4f ms median (p10 %.4f, p90 %.4f, n=%d, %s on %s)\n", *runtime_ms,
                  timing.p10_ms, timing.p90_ms, timing.n, timing_source.c_str(), device.c_str());
    o << buf;
  }
  for (const auto& [k, ms] : baseline_ms) {
    auto it = speedup.find(k);
    std::snprintf(buf, sizeof buf, "%-8s %.4f ms  speedup %.3fx\n", (k + ":").c_str(), ms,
                  it == speedup.end() ? 0.0 : it->second);
    o << buf;
  }
  if (profile && !profile->kernels.empty()) {
    o << "profile: " << profile->Summary() << "\n";
    for (size_t i = 0; i < profile->kernels.size() && i < 5; ++i) {
      const KernelTime& k = profile->kernels[i];
      std::snprintf(buf, sizeof buf, "  %5.1f%%  %.4f ms  x%d  %.120s\n", k.share * 100, k.ms, k.launches, k.name.c_str());
      o << buf;
    }
  }
  if (!error.empty()) o << "error:\n" << error << "\n";
  return o.str();
}

}  // namespace ax
