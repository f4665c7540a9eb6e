// Anthropic Messages API wire format.
#include <nlohmann/json.hpp>

#include "common/util.h"
#include "llm/wire.h"

namespace ax::llm {

using nlohmann::json;

namespace {

FinishReason MapStopReason(const std::string& s) {
  if (s == "end_turn" || s == "stop_sequence" || s.empty()) return FinishReason::kStop;
  if (s == "max_tokens" || s == "model_context_window_exceeded") return FinishReason::kLength;
  if (s == "tool_use") return FinishReason::kToolCalls;
  if (s == "refusal") return FinishReason::kContentFilter;
  return FinishReason::kOther;
}

int64_t Num(const json& j, const char* k) {
  return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<int64_t>() : 0;
}

class AnthropicWire : public Wire {
 public:
  explicit AnthropicWire(AnthropicWireOptions o) : o_(std::move(o)) {}
  const WireInfo& info() const override { return o_.info; }

  HttpRequest Build(const ChatRequest& req, int max_tokens) const override {
    json body;
    body["model"] = o_.info.model;
    body["max_tokens"] = max_tokens;
    if (!req.system.empty()) body["system"] = req.system;
    json msgs = json::array();
    for (const auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(msgs);
    if (req.temperature) body["temperature"] = *req.temperature;
    if (!req.stop.empty()) body["stop_sequences"] = req.stop;
    if (req.thinking_budget > 0)
      body["thinking"] = {{"type", "enabled"}, {"budget_tokens", req.thinking_budget}};
    HttpRequest h;
    h.url = o_.url;
    h.headers = {"x-api-key: " + o_.api_key, "anthropic-version: " + o_.version,
                 "Content-Type: application/json"};
    h.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    return h;
  }

  Status Parse(const std::string& text, WireReply* out) const override {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return Status::Error("reply is not JSON: " + FirstLine(text, 80));
    if (!j.is_object()) return Status::Error("reply is not a JSON object");
    if (j.value("type", "") == "error")
      return Status::Error("reply carries an error: " + ProviderErrorMessage(text));
    if (!j.contains("content") || !j["content"].is_array())
      return Status::Error("reply has no \"content\" array");
    WireReply r;
    // Thinking blocks are the model's scratch work, not the answer.
    for (const auto& block : j["content"])
      if (block.is_object() && block.value("type", "") == "text") r.text += block.value("text", "");
    if (j.contains("stop_reason") && j["stop_reason"].is_string())
      r.raw_finish = j["stop_reason"].get<std::string>();
    r.finish = MapStopReason(r.raw_finish);
    const json& u = j.value("usage", json::object());
    int64_t cache_read = Num(u, "cache_read_input_tokens");
    // Anthropic's input_tokens leaves out cached tokens; ours includes them.
    r.usage.input_tokens = Num(u, "input_tokens") + Num(u, "cache_creation_input_tokens") + cache_read;
    r.usage.cached_input_tokens = cache_read;
    r.usage.output_tokens = Num(u, "output_tokens");
    if (j.contains("model") && j["model"].is_string()) r.model = j["model"].get<std::string>();
    *out = std::move(r);
    return Status::Ok();
  }

  std::string Scrub(std::string text) const override {
    if (o_.api_key.size() < 4) return text;
    for (size_t p; (p = text.find(o_.api_key)) != std::string::npos;)
      text.replace(p, o_.api_key.size(), "[key]");
    return text;
  }

 private:
  AnthropicWireOptions o_;
};

}  // namespace

std::unique_ptr<Wire> MakeAnthropicWire(AnthropicWireOptions o) {
  return std::make_unique<AnthropicWire>(std::move(o));
}

}  // namespace ax::llm
