// Wire: one provider's HTTP dialect — how a ChatRequest becomes an HTTP
// request and how a reply body becomes text, finish reason and usage. The
// retry, rate-limit, accounting and recording machinery around it is shared
// (http_chat_client.h), so a new provider is only a new Wire.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "llm/client.h"
#include "llm/http_loop.h"

namespace ax::llm {

struct WireReply {
  std::string text;
  FinishReason finish = FinishReason::kStop;
  std::string raw_finish;
  Usage usage;
  std::string model;
};

// What error messages need to tell a person what to fix.
struct WireInfo {
  std::string provider;   // "openai", "azure", "anthropic", "compat"
  std::string model;      // model, or the Azure deployment
  std::string noun;       // "model" or "deployment"
  std::string key_var;    // env var holding the key; empty if none is needed
  std::string endpoint;   // the URL calls go to
};

class Wire {
 public:
  virtual ~Wire() = default;
  virtual const WireInfo& info() const = 0;
  // The HTTP request for `req` with the output limit already resolved.
  virtual HttpRequest Build(const ChatRequest& req, int max_tokens) const = 0;
  // Parses a 2xx body; a failure is a malformed reply.
  virtual Status Parse(const std::string& body, WireReply* out) const = 0;
  // Replaces the key wherever it appears (servers sometimes echo it).
  virtual std::string Scrub(std::string text) const = 0;
};

// OpenAI Chat Completions, also spoken by Azure OpenAI and compatible servers.
struct OpenAiWireOptions {
  WireInfo info;
  std::string url;                   // full .../chat/completions URL
  std::vector<std::string> headers;  // auth header(s), content type added
  std::string secret;                // for scrubbing; never sent anywhere else
  bool max_completion_tokens = true; // false: the older max_tokens field
};
std::unique_ptr<Wire> MakeOpenAiWire(OpenAiWireOptions o);

// Anthropic Messages API.
struct AnthropicWireOptions {
  WireInfo info;
  std::string url;                   // full .../v1/messages URL
  std::string api_key;
  std::string version = "2023-06-01";
};
std::unique_ptr<Wire> MakeAnthropicWire(AnthropicWireOptions o);

// The human message in a provider's JSON error body ({"error": {"message"}}
// and variants); the body's first line when it is not JSON.
std::string ProviderErrorMessage(const std::string& body);

}  // namespace ax::llm
