// OpenAI Chat Completions wire format (also Azure OpenAI and compatible
// servers such as vLLM, SGLang, Ollama and llama.cpp's server).
#include <nlohmann/json.hpp>

#include "common/util.h"
#include "llm/wire.h"

namespace ax::llm {

using nlohmann::json;

std::string ProviderErrorMessage(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_discarded()) {
    if (j.is_object() && j.contains("error")) {
      const json& e = j["error"];
      if (e.is_string()) return FirstLine(e.get<std::string>());
      if (e.is_object() && e.contains("message") && e["message"].is_string())
        return FirstLine(e["message"].get<std::string>());
    }
    if (j.is_object() && j.contains("message") && j["message"].is_string())
      return FirstLine(j["message"].get<std::string>());
    if (j.is_object() && j.contains("detail") && j["detail"].is_string())
      return FirstLine(j["detail"].get<std::string>());
  }
  return FirstLine(body, 200);
}

namespace {

FinishReason MapOpenAiFinish(const std::string& f) {
  if (f == "stop" || f.empty()) return FinishReason::kStop;
  if (f == "length") return FinishReason::kLength;
  if (f == "content_filter") return FinishReason::kContentFilter;
  if (f == "tool_calls" || f == "function_call") return FinishReason::kToolCalls;
  return FinishReason::kOther;
}

int64_t IntAt(const json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return 0;
  const json& x = j[a];
  if (!b) return x.is_number() ? x.get<int64_t>() : 0;
  if (!x.is_object() || !x.contains(b) || !x[b].is_number()) return 0;
  return x[b].get<int64_t>();
}

class OpenAiWire : public Wire {
 public:
  explicit OpenAiWire(OpenAiWireOptions o) : o_(std::move(o)) {
    o_.headers.push_back("Content-Type: application/json");
  }
  const WireInfo& info() const override { return o_.info; }

  HttpRequest Build(const ChatRequest& req, int max_tokens) const override {
    json body;
    body["model"] = o_.info.model;
    json msgs = json::array();
    if (!req.system.empty()) msgs.push_back({{"role", "system"}, {"content", req.system}});
    for (const auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(msgs);
    // Reasoning models reject max_tokens; older compatible servers only know it.
    body[o_.max_completion_tokens ? "max_completion_tokens" : "max_tokens"] = max_tokens;
    if (req.temperature) body["temperature"] = *req.temperature;
    if (!req.reasoning_effort.empty()) body["reasoning_effort"] = req.reasoning_effort;
    if (!req.stop.empty()) body["stop"] = req.stop;
    HttpRequest h;
    h.url = o_.url;
    h.headers = o_.headers;
    h.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    return h;
  }

  Status Parse(const std::string& text, WireReply* out) const override {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return Status::Error("reply is not JSON: " + FirstLine(text, 80));
    if (!j.is_object()) return Status::Error("reply is not a JSON object");
    if (j.contains("error") && !j["error"].is_null())
      return Status::Error("reply carries an error: " + ProviderErrorMessage(text));
    if (!j.contains("choices") || !j["choices"].is_array())
      return Status::Error("reply has no \"choices\" array");
    WireReply r;
    if (!j["choices"].empty()) {
      const json& c = j["choices"][0];
      if (!c.is_object()) return Status::Error("choices[0] is not an object");
      const json& msg = c.value("message", json::object());
      if (msg.contains("content")) {
        const json& content = msg["content"];
        if (content.is_string()) {
          r.text = content.get<std::string>();
        } else if (content.is_array()) {  // some servers send content parts
          for (const auto& part : content)
            if (part.is_object() && part.value("type", "") == "text") r.text += part.value("text", "");
        } else if (!content.is_null()) {
          return Status::Error("choices[0].message.content is neither text nor null");
        }
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string())
        r.raw_finish = c["finish_reason"].get<std::string>();
      r.finish = MapOpenAiFinish(r.raw_finish);
      if (r.text.empty() && msg.contains("refusal") && msg["refusal"].is_string())
        r.finish = FinishReason::kContentFilter, r.raw_finish = "refusal";
    }
    const json& u = j.value("usage", json::object());
    r.usage.input_tokens = IntAt(u, "prompt_tokens");
    r.usage.output_tokens = IntAt(u, "completion_tokens");
    r.usage.reasoning_tokens = IntAt(u, "completion_tokens_details", "reasoning_tokens");
    r.usage.cached_input_tokens = IntAt(u, "prompt_tokens_details", "cached_tokens");
    if (j.contains("model") && j["model"].is_string()) r.model = j["model"].get<std::string>();
    *out = std::move(r);
    return Status::Ok();
  }

  std::string Scrub(std::string text) const override {
    if (o_.secret.size() < 4) return text;
    for (size_t p; (p = text.find(o_.secret)) != std::string::npos;)
      text.replace(p, o_.secret.size(), "[key]");
    return text;
  }

 private:
  OpenAiWireOptions o_;
};

}  // namespace

std::unique_ptr<Wire> MakeOpenAiWire(OpenAiWireOptions o) {
  return std::make_unique<OpenAiWire>(std::move(o));
}

}  // namespace ax::llm
