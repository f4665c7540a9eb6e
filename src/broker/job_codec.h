// Jobs and results as they travel through the broker: JSON documents with a
// version, size-capped and validated field by field on the way in, so that a
// malformed or hostile job becomes an error result, never a crashed worker.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "judge/judge.h"

namespace ax::broker {

inline constexpr size_t kMaxJobBytes = 16u << 20;  // task + candidate sources, options

enum class JobKind { kEval, kCheck, kTrace };
const char* JobKindName(JobKind k);

struct Job {
  std::string id;
  JobKind kind = JobKind::kEval;
  EvalRequest req;  // for kCheck and kTrace only the task and options count
};

std::string EncodeJob(const Job& job);
// The task's hash is recomputed from its source. kInvalidInput with a
// one-line reason for anything malformed, too large or out of range.
Status DecodeJob(const std::string& payload, size_t max_bytes, Job* out);

struct JobResult {
  std::string job_id;
  std::string worker;   // the worker's name
  Status status;        // not ok: no verdict (the judge's error), as EvalResult
  bool bad_input = false;
  Verdict verdict;      // kEval
  TaskInfo info;        // kCheck (and kTrace's task)
  nlohmann::json graph; // kTrace
  double judge_s = 0;   // seconds the worker spent on it (for the broker's overhead)
};

std::string EncodeResult(const JobResult& r);
Status DecodeResult(const std::string& payload, JobResult* out);

nlohmann::json OptionsToJson(const JudgeOptions& o);
Status OptionsFromJson(const nlohmann::json& j, JudgeOptions* o);

}  // namespace ax::broker
