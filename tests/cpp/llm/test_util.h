// Helpers shared by the LLM tests: a fake environment and fast retry settings.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "llm/factory.h"

namespace ax::llm::testing {

inline EnvFn FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

// Short, deterministic back-off so fault tests run in milliseconds.
inline ClientConfig FastConfig(std::map<std::string, std::string> env, std::string base_url = "") {
  ClientConfig c;
  c.retry.max_attempts = 3;
  c.retry.initial_delay_s = 0.02;
  c.retry.max_delay_s = 0.1;
  c.retry.jitter = 0;
  c.retry.max_retry_after_s = 5;
  c.timeout_s = 2;
  c.connect_timeout_s = 1;
  c.default_max_tokens = 256;
  c.env = FakeEnv(std::move(env));
  c.base_url = std::move(base_url);
  c.seed = 1;
  return c;
}

inline std::unique_ptr<LlmClient> MustMake(const std::string& spec, const ClientConfig& cfg,
                                           const RunServices& s = {}) {
  std::unique_ptr<LlmClient> c;
  Status st = MakeClient(spec, cfg, s, &c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

inline ChatRequest Ask(const std::string& text, const std::string& task = "t1") {
  ChatRequest r;
  r.system = "You write fast GPU kernels.";
  r.messages.push_back({"user", text});
  r.task = task;
  return r;
}

}  // namespace ax::llm::testing
