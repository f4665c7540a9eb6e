// HttpChatClient: the machinery every HTTP backend shares. For each call it
// checks the budget, waits for the run's rate limiter, sends the request on
// the shared event loop, classifies the outcome, retries with back-off where
// that can help, then accounts, records and answers the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "llm/accounting.h"
#include "llm/client.h"
#include "llm/http_loop.h"
#include "llm/rate_limiter.h"
#include "llm/recorder.h"
#include "llm/retry.h"
#include "llm/wire.h"

namespace ax::llm {

// Looks up an environment variable; nullopt when unset or empty.
using EnvFn = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> ProcessEnv(const std::string& name);

struct ClientConfig {
  RetryPolicy retry;
  double timeout_s = 600;         // per attempt, whole reply
  double connect_timeout_s = 15;
  int default_max_tokens = 8192;  // when a request leaves max_tokens at 0
  std::string base_url;           // replaces the provider's default endpoint
  EnvFn env;                      // null: the process environment
  uint64_t seed = 0;              // back-off jitter; 0 = from the clock
};

// What all clients of one run share. Any member left null is created
// privately by the client (no limits, no budget, no recording).
struct RunServices {
  std::shared_ptr<HttpLoop> loop;
  std::shared_ptr<RateLimiter> limiter;
  std::shared_ptr<Accountant> accountant;
  std::shared_ptr<CallSink> sink;
};

class HttpChatClient : public LlmClient {
 public:
  HttpChatClient(std::unique_ptr<Wire> wire, ClientConfig cfg, RunServices services);
  ~HttpChatClient() override;
  void ChatAsync(ChatRequest req, ChatCallback done) override;
  std::string Describe() const override;

  // Implementation detail, named here so the .cpp can define them.
  struct Core;
  struct Call;
  struct Steps;

 private:
  std::shared_ptr<HttpLoop> loop_;  // the core holds a plain pointer to it
  std::shared_ptr<Core> core_;
};

}  // namespace ax::llm
