// LlmClient: one chat call in, reply text + token usage out. Every backend
// (OpenAI, Azure OpenAI, Anthropic, OpenAI-compatible servers, replay files)
// sits behind this interface, so the proposer never knows which one it has.
//
// Calls are asynchronous: ChatAsync() returns at once and the callback runs
// later on the client's event-loop thread (or inline for replay). Chat() wraps
// it in a future. Failures come back as a ChatResult with a one-line reason,
// never as an exception.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ax::llm {

struct Message {
  std::string role;  // "user" or "assistant"
  std::string content;
};

struct ChatRequest {
  std::string system;              // system prompt; may be empty
  std::vector<Message> messages;   // at least one
  int max_tokens = 0;              // output limit; 0 = the client's default
  std::optional<double> temperature;
  std::string reasoning_effort;    // OpenAI reasoning models: low|medium|high
  int thinking_budget = 0;         // Anthropic extended thinking, tokens; 0 = off
  std::vector<std::string> stop;
  // Tags for accounting and recording; not part of the request content, so
  // they do not change the replay key.
  std::string task;
  std::string purpose;
};

enum class FinishReason { kStop, kLength, kContentFilter, kToolCalls, kOther };

struct Usage {
  int64_t input_tokens = 0;         // all prompt tokens, cached ones included
  int64_t output_tokens = 0;        // all completion tokens, reasoning included
  int64_t reasoning_tokens = 0;     // where the provider reports them
  int64_t cached_input_tokens = 0;  // prompt tokens served from a cache
  int64_t total() const { return input_tokens + output_tokens; }
};

enum class ErrorKind {
  kNone,
  kConfig,       // bad spec, missing key: fix the setup
  kAuth,         // 401/403: fix the key
  kQuota,        // billing quota exhausted (429 insufficient_quota)
  kBadRequest,   // 400/413/422: the request itself is wrong
  kNotFound,     // 404: model or deployment unknown
  kRateLimited,  // 429 after all retries
  kServer,       // 5xx after all retries
  kTimeout,      // no reply within the per-call timeout, after all retries
  kConnection,   // connection refused/reset/dropped, after all retries
  kMalformed,    // reply was not the provider's JSON, after all retries
  kTruncated,    // reply stopped at the output-token limit (text kept)
  kEmpty,        // reply had no text
  kBudget,       // the run's token or dollar budget is spent
  kReplayMiss,   // replay file has no reply for this request
  kShutdown,     // the client was destroyed with the call in flight
};
const char* ErrorKindName(ErrorKind k);
const char* FinishReasonName(FinishReason f);
// Parses names written by the two functions above; false if unknown.
bool ParseErrorKind(const std::string& s, ErrorKind* out);
bool ParseFinishReason(const std::string& s, FinishReason* out);

struct ChatReply {
  std::string text;
  FinishReason finish = FinishReason::kStop;
  std::string raw_finish;  // the provider's own word ("length", "max_tokens")
  std::string model;       // the model the server says answered
  std::string request_id;  // the provider's request id header, if any
};

struct ChatResult {
  Status status;                  // ok, or a one-line reason
  ErrorKind error = ErrorKind::kNone;
  ChatReply reply;                // filled whenever a reply arrived
  Usage usage;
  std::string provider, model;    // e.g. "openai", "gpt-4o"
  int attempts = 0;               // HTTP attempts made (0 for replay/refusals)
  double latency_s = 0;           // wall time of the call, retries included
  double cost_usd = 0;
  bool ok() const { return status.ok(); }
};

using ChatCallback = std::function<void(ChatResult)>;

class LlmClient {
 public:
  virtual ~LlmClient() = default;
  // Starts the call; `done` runs exactly once.
  virtual void ChatAsync(ChatRequest req, ChatCallback done) = 0;
  // "provider:model", as the proposer spec names it.
  virtual std::string Describe() const = 0;

  std::future<ChatResult> Chat(ChatRequest req);
  ChatResult ChatSync(ChatRequest req) { return Chat(std::move(req)).get(); }
};

// The request's content (system, messages, generation parameters) as
// canonical JSON text, and its SHA-256: the replay key.
std::string RequestContentJson(const ChatRequest& req);
std::string RequestHash(const ChatRequest& req);

// Rough token estimate for rate limiting before the provider counts them.
int64_t EstimatePromptTokens(const ChatRequest& req);

}  // namespace ax::llm
