#include "broker/job_codec.h"

#include "broker/keys.h"
#include "common/util.h"

using nlohmann::json;

namespace ax::broker {

namespace {
constexpr int kVersion = 1;

Status Bad(const std::string& why) { return Status::Error(StatusCode::kInvalidInput, "malformed job: " + why); }

// Reads an integer field within [lo, hi]; absent keeps *out.
bool IntIn(const json& j, const char* key, long long lo, long long hi, long long* out, std::string* why) {
  if (!j.contains(key)) return true;
  const json& v = j[key];
  if (!v.is_number_integer()) {
    *why = std::string(key) + " must be an integer";
    return false;
  }
  long long x = v.get<long long>();
  if (x < lo || x > hi) {
    *why = std::string(key) + " out of range";
    return false;
  }
  *out = x;
  return true;
}

bool NumIn(const json& j, const char* key, double lo, double hi, double* out, std::string* why) {
  if (!j.contains(key)) return true;
  const json& v = j[key];
  if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi) {
    *why = std::string(key) + " must be a number from " + std::to_string(lo) + " to " + std::to_string(hi);
    return false;
  }
  *out = v.get<double>();
  return true;
}

bool Str(const json& j, const char* key, size_t max, std::string* out, std::string* why, bool required) {
  if (!j.contains(key)) {
    if (required) *why = std::string("missing ") + key;
    return !required;
  }
  if (!j[key].is_string() || j[key].get_ref<const std::string&>().size() > max) {
    *why = std::string(key) + " must be a string of at most " + std::to_string(max) + " bytes";
    return false;
  }
  *out = j[key].get<std::string>();
  return true;
}
}  // namespace

const char* JobKindName(JobKind k) {
  switch (k) {
    case JobKind::kEval: return "eval";
    case JobKind::kCheck: return "check";
    case JobKind::kTrace: return "trace";
  }
  return "eval";
}

json OptionsToJson(const JudgeOptions& o) {
  json j = {{"device", o.device},
            {"tolerance", o.tolerance},
            {"precision", PrecisionName(o.precision)},
            {"timing", TimingModeName(o.timing)},
            {"trials", o.trials},
            {"recheck_trials", o.recheck_trials},
            {"speedup_recheck", o.speedup_recheck},
            {"time", o.time},
            {"warmup", o.warmup},
            {"iters", o.iters},
            {"input_sets", o.input_sets},
            {"flush_bytes", o.flush_bytes},
            {"baselines", o.baselines},
            {"compile_timeout_s", o.compile_timeout_s},
            {"run_timeout_s", o.run_timeout_s},
            {"call_timeout_s", o.call_timeout_s},
            {"init_seed", o.init_seed},
            {"use_cache", o.use_cache}};
  if (o.seed) j["seed"] = *o.seed;
  return j;
}

Status OptionsFromJson(const json& j, JudgeOptions* o) {
  if (!j.is_object()) return Bad("options must be an object");
  JudgeOptions r;
  std::string why;
  long long trials = r.trials, recheck = r.recheck_trials, warmup = r.warmup, iters = r.iters, sets = r.input_sets,
            flush = r.flush_bytes, init_seed = r.init_seed;
  double compile_t = r.compile_timeout_s, run_t = r.run_timeout_s, call_t = r.call_timeout_s, sp = r.speedup_recheck;
  if (!Str(j, "device", 32, &r.device, &why, false) || !Str(j, "tolerance", 64, &r.tolerance, &why, false) ||
      !IntIn(j, "trials", 1, 1000, &trials, &why) || !IntIn(j, "recheck_trials", 0, 1000, &recheck, &why) ||
      !IntIn(j, "warmup", -1, 100000, &warmup, &why) || !IntIn(j, "iters", -1, 100000, &iters, &why) ||
      !IntIn(j, "input_sets", 1, 64, &sets, &why) || !IntIn(j, "flush_bytes", -1, 1LL << 36, &flush, &why) ||
      !IntIn(j, "init_seed", 0, 1LL << 31, &init_seed, &why) ||
      !NumIn(j, "compile_timeout_s", 1, 86400, &compile_t, &why) || !NumIn(j, "run_timeout_s", 1, 86400, &run_t, &why) ||
      !NumIn(j, "call_timeout_s", 1, 86400, &call_t, &why) ||
      !NumIn(j, "speedup_recheck", 1, 1e9, &sp, &why)) {
    return Bad(why);
  }
  Tolerance tol;
  if (!LookupTolerance(r.tolerance, &tol).ok()) return Bad("unknown tolerance");
  if (j.contains("precision")) {  // absent in jobs of older clients: fp32
    std::string p;
    if (!Str(j, "precision", 16, &p, &why, false)) return Bad(why);
    if (!ParsePrecision(p, &r.precision).ok()) return Bad("unknown precision");
  }
  if (j.contains("timing")) {  // absent in jobs of older clients: host
    std::string t;
    if (!Str(j, "timing", 16, &t, &why, false)) return Bad(why);
    if (!ParseTimingMode(t, &r.timing).ok()) return Bad("unknown timing");
  }
  if (j.contains("time")) {
    if (!j["time"].is_boolean()) return Bad("time must be a boolean");
    r.time = j["time"];
  }
  if (j.contains("use_cache")) {
    if (!j["use_cache"].is_boolean()) return Bad("use_cache must be a boolean");
    r.use_cache = j["use_cache"];
  }
  if (j.contains("baselines")) {
    if (!j["baselines"].is_array() || j["baselines"].size() > 2) return Bad("baselines must be a short list");
    for (const auto& b : j["baselines"]) {
      if (!b.is_string() || (b != "eager" && b != "compile" && b != "none")) return Bad("unknown baseline");
      r.baselines.push_back(b);
    }
  }
  if (j.contains("seed")) {
    if (!j["seed"].is_number_unsigned() && !j["seed"].is_number_integer()) return Bad("seed must be an integer");
    r.seed = j["seed"].get<unsigned long long>();
  }
  r.trials = static_cast<int>(trials);
  r.recheck_trials = static_cast<int>(recheck);
  r.warmup = static_cast<int>(warmup);
  r.iters = static_cast<int>(iters);
  r.input_sets = static_cast<int>(sets);
  r.flush_bytes = flush;
  r.init_seed = static_cast<int>(init_seed);
  r.compile_timeout_s = compile_t;
  r.run_timeout_s = run_t;
  r.call_timeout_s = call_t;
  r.speedup_recheck = sp;
  *o = r;
  return Status::Ok();
}

std::string EncodeJob(const Job& job) {
  const EvalRequest& q = job.req;
  json j = {{"v", kVersion},
            {"id", job.id},
            {"kind", JobKindName(job.kind)},
            {"task", {{"name", q.task.name}, {"path", q.task.path}, {"source", q.task.source}}},
            {"options", OptionsToJson(q.options)}};
  if (job.kind == JobKind::kEval) j["candidate"] = {{"path", q.candidate_path}, {"source", q.candidate_source}};
  return j.dump();
}

Status DecodeJob(const std::string& payload, size_t max_bytes, Job* out) {
  if (payload.size() > max_bytes) {
    return Bad("it is " + std::to_string(payload.size()) + " bytes, over the limit of " + std::to_string(max_bytes));
  }
  json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  if (!j.contains("v") || j["v"] != kVersion) return Bad("unknown version (this worker speaks version 1)");
  Job job;
  std::string why, kind;
  if (!Str(j, "id", 100, &job.id, &why, true) || !Str(j, "kind", 16, &kind, &why, true)) return Bad(why);
  if (!SafeName(job.id)) return Bad("bad job id");
  if (kind == "eval") {
    job.kind = JobKind::kEval;
  } else if (kind == "check") {
    job.kind = JobKind::kCheck;
  } else if (kind == "trace") {
    job.kind = JobKind::kTrace;
  } else {
    return Bad("unknown kind");
  }
  if (!j.contains("task") || !j["task"].is_object()) return Bad("missing task");
  const json& t = j["task"];
  TaskRef& task = job.req.task;
  if (!Str(t, "name", 200, &task.name, &why, true) || !Str(t, "path", 4096, &task.path, &why, false) ||
      !Str(t, "source", max_bytes, &task.source, &why, true)) {
    return Bad("task: " + why);
  }
  if (task.source.empty()) return Bad("task: empty source");
  task.hash = Sha256Hex(task.source);
  if (job.kind == JobKind::kEval) {
    if (!j.contains("candidate") || !j["candidate"].is_object()) return Bad("missing candidate");
    const json& c = j["candidate"];
    if (!Str(c, "path", 4096, &job.req.candidate_path, &why, false) ||
        !Str(c, "source", max_bytes, &job.req.candidate_source, &why, true)) {
      return Bad("candidate: " + why);
    }
  }
  if (!j.contains("options")) return Bad("missing options");
  Status s = OptionsFromJson(j["options"], &job.req.options);
  if (!s.ok()) return s;
  *out = std::move(job);
  return Status::Ok();
}

std::string EncodeResult(const JobResult& r) {
  json j = {{"v", kVersion}, {"job", r.job_id}, {"worker", r.worker}, {"ok", r.status.ok()},
            {"judge_s", r.judge_s}};
  if (!r.status.ok()) {
    j["error"] = r.status.message();
    j["code"] = static_cast<int>(r.status.code());
    j["bad_input"] = r.bad_input;
  } else {
    j["verdict"] = r.verdict.ToJson();
    if (!r.graph.is_null()) j["graph"] = r.graph;
  }
  j["info"] = {{"ok", r.info.ok},
               {"error", r.info.error},
               {"degenerate", r.info.degenerate},
               {"outputs", r.info.outputs_json},
               {"footprint_bytes", r.info.footprint_bytes}};
  return j.dump();
}

Status DecodeResult(const std::string& payload, JobResult* out) {
  json j = json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("job") || !j["job"].is_string()) {
    return Status::Error(StatusCode::kInvalidInput, "malformed result from the broker");
  }
  try {
    JobResult r;
    r.job_id = j["job"];
    r.worker = j.value("worker", "");
    r.judge_s = j.value("judge_s", 0.0);
    if (!j.value("ok", false)) {
      const int code = j.value("code", static_cast<int>(StatusCode::kError));
      r.status = Status::Error(static_cast<StatusCode>(code), j.value("error", "the remote judge failed"));
      r.bad_input = j.value("bad_input", false);
    } else {
      if (j.contains("verdict") && j["verdict"].is_object() && !j["verdict"].empty()) {
        r.verdict = Verdict::FromJson(j["verdict"]);
      }
      if (j.contains("graph")) r.graph = j["graph"];
    }
    {
      const json i = j.contains("info") && j["info"].is_object() ? j["info"] : json::object();
      r.info.ok = i.value("ok", false);
      r.info.error = i.value("error", "");
      r.info.degenerate = i.value("degenerate", std::vector<std::string>{});
      r.info.outputs_json = i.value("outputs", "[]");
      r.info.footprint_bytes = i.value("footprint_bytes", int64_t{0});
    }
    *out = std::move(r);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(StatusCode::kInvalidInput, std::string("malformed result from the broker: ") + e.what());
  }
}

}  // namespace ax::broker
