#include "llm/client.h"

#include <memory>

#include <nlohmann/json.hpp>

#include "common/util.h"

namespace ax::llm {

namespace {
struct KindName {
  ErrorKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {ErrorKind::kNone, "none"},           {ErrorKind::kConfig, "config"},
    {ErrorKind::kAuth, "auth"},           {ErrorKind::kQuota, "quota"},
    {ErrorKind::kBadRequest, "bad_request"}, {ErrorKind::kNotFound, "not_found"},
    {ErrorKind::kRateLimited, "rate_limited"}, {ErrorKind::kServer, "server"},
    {ErrorKind::kTimeout, "timeout"},     {ErrorKind::kConnection, "connection"},
    {ErrorKind::kMalformed, "malformed"}, {ErrorKind::kTruncated, "truncated"},
    {ErrorKind::kEmpty, "empty"},         {ErrorKind::kBudget, "budget"},
    {ErrorKind::kReplayMiss, "replay_miss"}, {ErrorKind::kShutdown, "shutdown"},
};
struct FinishName {
  FinishReason f;
  const char* name;
};
constexpr FinishName kFinishes[] = {
    {FinishReason::kStop, "stop"},
    {FinishReason::kLength, "length"},
    {FinishReason::kContentFilter, "content_filter"},
    {FinishReason::kToolCalls, "tool_calls"},
    {FinishReason::kOther, "other"},
};
}  // namespace

const char* ErrorKindName(ErrorKind k) {
  for (const auto& e : kKinds)
    if (e.kind == k) return e.name;
  return "unknown";
}

bool ParseErrorKind(const std::string& s, ErrorKind* out) {
  for (const auto& e : kKinds)
    if (s == e.name) {
      *out = e.kind;
      return true;
    }
  return false;
}

const char* FinishReasonName(FinishReason f) {
  for (const auto& e : kFinishes)
    if (e.f == f) return e.name;
  return "other";
}

bool ParseFinishReason(const std::string& s, FinishReason* out) {
  for (const auto& e : kFinishes)
    if (s == e.name) {
      *out = e.f;
      return true;
    }
  return false;
}

std::future<ChatResult> LlmClient::Chat(ChatRequest req) {
  auto promise = std::make_shared<std::promise<ChatResult>>();
  auto fut = promise->get_future();
  ChatAsync(std::move(req), [promise](ChatResult r) { promise->set_value(std::move(r)); });
  return fut;
}

std::string RequestContentJson(const ChatRequest& req) {
  nlohmann::json j;
  j["system"] = req.system;
  nlohmann::json msgs = nlohmann::json::array();
  for (const auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  j["messages"] = std::move(msgs);
  j["max_tokens"] = req.max_tokens;
  if (req.temperature) j["temperature"] = *req.temperature;
  else j["temperature"] = nullptr;
  j["reasoning_effort"] = req.reasoning_effort;
  j["thinking_budget"] = req.thinking_budget;
  j["stop"] = req.stop;
  // nlohmann::json orders object keys, so the text is canonical.
  return j.dump();
}

std::string RequestHash(const ChatRequest& req) { return Sha256Hex(RequestContentJson(req)); }

int64_t EstimatePromptTokens(const ChatRequest& req) {
  size_t chars = req.system.size();
  for (const auto& m : req.messages) chars += m.content.size() + 8;
  // About four characters a token for English and code; errs high for code.
  return static_cast<int64_t>(chars / 4 + 16);
}

}  // namespace ax::llm
