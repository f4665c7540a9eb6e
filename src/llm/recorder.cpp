#include "llm/recorder.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/util.h"

namespace ax::llm {

using nlohmann::json;

namespace {
constexpr int kFormatVersion = 1;

json RequestJson(const ChatRequest& q) {
  json j = json::parse(RequestContentJson(q));
  return j;
}

Status RequestFrom(const json& j, ChatRequest* q) {
  if (!j.is_object()) return Status::Error("\"request\" is not an object");
  q->system = j.value("system", "");
  if (!j.contains("messages") || !j["messages"].is_array())
    return Status::Error("\"request.messages\" missing");
  for (const auto& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m.contains("content"))
      return Status::Error("a message lacks role or content");
    q->messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  q->max_tokens = j.value("max_tokens", 0);
  if (j.contains("temperature") && j["temperature"].is_number()) q->temperature = j["temperature"].get<double>();
  q->reasoning_effort = j.value("reasoning_effort", "");
  q->thinking_budget = j.value("thinking_budget", 0);
  if (j.contains("stop") && j["stop"].is_array()) q->stop = j["stop"].get<std::vector<std::string>>();
  return Status::Ok();
}
}  // namespace

std::string RecordToJsonLine(const CallRecord& r) {
  const ChatResult& res = r.result;
  json j;
  j["v"] = kFormatVersion;
  j["time"] = r.unix_time;
  j["provider"] = r.provider;
  j["model"] = r.model;
  j["task"] = r.task;
  j["purpose"] = r.purpose;
  j["request_hash"] = r.request_hash;
  j["request"] = RequestJson(r.request);
  j["reply"] = {{"text", res.reply.text},
                {"finish_reason", FinishReasonName(res.reply.finish)},
                {"raw_finish_reason", res.reply.raw_finish},
                {"model", res.reply.model},
                {"request_id", res.reply.request_id}};
  j["usage"] = {{"input_tokens", res.usage.input_tokens},
                {"output_tokens", res.usage.output_tokens},
                {"reasoning_tokens", res.usage.reasoning_tokens},
                {"cached_input_tokens", res.usage.cached_input_tokens}};
  j["cost_usd"] = res.cost_usd;
  j["latency_s"] = res.latency_s;
  j["attempts"] = res.attempts;
  json log = json::array();
  for (const auto& a : r.attempt_log)
    log.push_back({{"http_status", a.http_status}, {"error", a.error},
                   {"elapsed_s", a.elapsed_s}, {"wait_after_s", a.wait_after_s}});
  j["attempt_log"] = std::move(log);
  j["ok"] = res.ok();
  j["error_kind"] = ErrorKindName(res.error);
  j["error"] = res.ok() ? "" : res.status.message();
  // Replies can hold any bytes a model emits; never fail on bad UTF-8.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status RecordFromJsonLine(const std::string& line, CallRecord* out) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Error("not a JSON object");
  try {
    int v = j.value("v", 0);
    if (v != kFormatVersion)
      return Status::Error("record format version " + std::to_string(v) + ", expected " +
                           std::to_string(kFormatVersion));
    CallRecord r;
    r.unix_time = j.value("time", 0.0);
    r.provider = j.value("provider", "");
    r.model = j.value("model", "");
    r.task = j.value("task", "");
    r.purpose = j.value("purpose", "");
    r.request_hash = j.value("request_hash", "");
    if (!j.contains("request")) return Status::Error("\"request\" missing");
    Status s = RequestFrom(j["request"], &r.request);
    if (!s.ok()) return s;
    r.request.task = r.task;
    r.request.purpose = r.purpose;
    ChatResult& res = r.result;
    const json& rep = j.value("reply", json::object());
    res.reply.text = rep.value("text", "");
    if (!ParseFinishReason(rep.value("finish_reason", "stop"), &res.reply.finish))
      return Status::Error("unknown finish_reason");
    res.reply.raw_finish = rep.value("raw_finish_reason", "");
    res.reply.model = rep.value("model", "");
    res.reply.request_id = rep.value("request_id", "");
    const json& u = j.value("usage", json::object());
    res.usage.input_tokens = u.value("input_tokens", int64_t(0));
    res.usage.output_tokens = u.value("output_tokens", int64_t(0));
    res.usage.reasoning_tokens = u.value("reasoning_tokens", int64_t(0));
    res.usage.cached_input_tokens = u.value("cached_input_tokens", int64_t(0));
    res.cost_usd = j.value("cost_usd", 0.0);
    res.latency_s = j.value("latency_s", 0.0);
    res.attempts = j.value("attempts", 0);
    res.provider = r.provider;
    res.model = r.model;
    if (!ParseErrorKind(j.value("error_kind", "none"), &res.error))
      return Status::Error("unknown error_kind '" + j.value("error_kind", "") + "'");
    if (!j.value("ok", true)) {
      std::string msg = j.value("error", "");
      res.status = Status::Error(msg.empty() ? "recorded call failed" : msg);
    }
    for (const auto& a : j.value("attempt_log", json::array()))
      r.attempt_log.push_back({a.value("http_status", 0L), a.value("error", ""),
                               a.value("elapsed_s", 0.0), a.value("wait_after_s", 0.0)});
    if (r.request_hash.empty()) r.request_hash = RequestHash(r.request);
    *out = std::move(r);
  } catch (const json::exception& e) {
    return Status::Error(std::string("field of the wrong type: ") + e.what());
  }
  return Status::Ok();
}

Status JsonlRecorder::Open(const std::string& path, bool append, std::unique_ptr<JsonlRecorder>* out) {
  FILE* f = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!f) return Status::Error("cannot open recording file " + path + " for writing");
  out->reset(new JsonlRecorder(path, f));
  return Status::Ok();
}

JsonlRecorder::~JsonlRecorder() {
  if (f_) std::fclose(f_);
}

void JsonlRecorder::Write(const CallRecord& r) {
  std::string line = RecordToJsonLine(r);
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  // One write and a flush per call: a killed run keeps every finished call.
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

Status ReadRecords(const std::string& path, std::vector<CallRecord>* out) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read recording " + path);
  std::string line;
  int n = 0;
  out->clear();
  while (std::getline(in, line)) {
    n++;
    if (Trim(line).empty()) continue;
    CallRecord r;
    Status s = RecordFromJsonLine(line, &r);
    if (!s.ok()) return Status::Error(path + " line " + std::to_string(n) + ": " + s.message());
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace ax::llm
