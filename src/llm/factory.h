// MakeClient: turns a proposer spelling into a ready client.
//
//   openai:MODEL            OpenAI Chat Completions   OPENAI_API_KEY
//   azure:DEPLOYMENT        Azure OpenAI              AZURE_OPENAI_API_KEY,
//                                                     AZURE_OPENAI_ENDPOINT,
//                                                     OPENAI_API_VERSION (optional)
//   anthropic:MODEL         Anthropic Messages        ANTHROPIC_API_KEY
//   compat:MODEL@BASE_URL   any OpenAI-compatible     COMPAT_API_KEY (optional)
//   replay:FILE             recorded replies, no network
//
// `builtin` is a proposer that needs no LLM; asking for a client for it is an
// error. A missing key is a one-line error naming the variable.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "llm/client.h"
#include "llm/http_chat_client.h"

namespace ax::llm {

struct ParsedSpec {
  std::string kind;      // openai | azure | anthropic | compat | replay
  std::string model;     // model or deployment (empty for replay)
  std::string base_url;  // compat only
  std::string file;      // replay only
};

Status ParseSpec(const std::string& spec, ParsedSpec* out);

Status MakeClient(const std::string& spec, const ClientConfig& cfg, const RunServices& services,
                  std::unique_ptr<LlmClient>* out);

}  // namespace ax::llm
