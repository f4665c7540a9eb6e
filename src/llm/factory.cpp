#include "llm/factory.h"

#include <cctype>

#include "llm/replay_client.h"
#include "llm/wire.h"

namespace ax::llm {

namespace {

constexpr const char* kSpellings =
    "openai:MODEL, azure:DEPLOYMENT, anthropic:MODEL, compat:MODEL@BASE_URL, replay:FILE or builtin";

std::string StripSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

bool IsHttpUrl(const std::string& s) {
  return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0;
}

// A base URL with no path gets the conventional /v1 of OpenAI-style servers.
std::string WithV1(const std::string& base) {
  size_t scheme = base.find("://");
  size_t path = base.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return path == std::string::npos ? base + "/v1" : base;
}

}  // namespace

Status ParseSpec(const std::string& spec, ParsedSpec* out) {
  if (spec == "builtin")
    return Status::Error("proposer 'builtin' is not an LLM and needs no client; use it without an LLM backend");
  size_t colon = spec.find(':');
  if (colon == std::string::npos)
    return Status::Error("unknown proposer '" + spec + "'; expected " + kSpellings);
  ParsedSpec p;
  p.kind = spec.substr(0, colon);
  std::string rest = spec.substr(colon + 1);
  if (p.kind == "replay") {
    if (rest.empty()) return Status::Error("replay: expected replay:FILE");
    p.file = rest;
  } else if (p.kind == "compat") {
    size_t at = rest.rfind("@http");
    if (at == std::string::npos || at == 0 || !IsHttpUrl(rest.substr(at + 1)))
      return Status::Error("compat: expected compat:MODEL@BASE_URL, e.g. compat:qwen2.5-coder@http://127.0.0.1:8080/v1; got '" +
                           spec + "'");
    p.model = rest.substr(0, at);
    p.base_url = StripSlash(rest.substr(at + 1));
  } else if (p.kind == "openai" || p.kind == "azure" || p.kind == "anthropic") {
    if (rest.empty())
      return Status::Error(p.kind + ": no " + (p.kind == "azure" ? "deployment" : "model") +
                           " given; expected " + p.kind + ":" + (p.kind == "azure" ? "DEPLOYMENT" : "MODEL"));
    p.model = rest;
  } else {
    return Status::Error("unknown proposer kind '" + p.kind + "' in '" + spec + "'; expected " + kSpellings);
  }
  for (char ch : p.model)
    if (std::isspace(static_cast<unsigned char>(ch)) || (ch == '/' && p.kind == "azure") || ch == '?' || ch == '#')
      return Status::Error(p.kind + ": '" + p.model + "' is not a valid " +
                           (p.kind == "azure" ? "deployment" : "model") + " name");
  *out = std::move(p);
  return Status::Ok();
}

Status MakeClient(const std::string& spec, const ClientConfig& cfg, const RunServices& services,
                  std::unique_ptr<LlmClient>* out) {
  ParsedSpec p;
  Status s = ParseSpec(spec, &p);
  if (!s.ok()) return s;
  EnvFn env = cfg.env ? cfg.env : EnvFn(ProcessEnv);
  auto need = [&](const std::string& var, const std::string& what, std::string* val) -> Status {
    auto v = env(var);
    if (!v) return Status::Error(p.kind + ": " + var + " is not set; export " + what);
    *val = *v;
    return Status::Ok();
  };

  if (p.kind == "replay") {
    std::unique_ptr<ReplayClient> r;
    Status rs = ReplayClient::Open(p.file, services.accountant, services.sink, &r);
    if (!rs.ok()) return rs;
    *out = std::move(r);
    return Status::Ok();
  }
  if (services.accountant) {
    Status priced = services.accountant->CheckPriced(p.model);
    if (!priced.ok()) return Status::Error(p.kind + ": " + priced.message());
  }

  std::unique_ptr<Wire> wire;
  if (p.kind == "openai" || p.kind == "compat") {
    OpenAiWireOptions o;
    o.info.provider = p.kind;
    o.info.model = p.model;
    o.info.noun = "model";
    std::string base;
    if (p.kind == "openai") {
      s = need("OPENAI_API_KEY", "your OpenAI API key", &o.secret);
      if (!s.ok()) return s;
      o.info.key_var = "OPENAI_API_KEY";
      base = !cfg.base_url.empty() ? cfg.base_url : env("OPENAI_BASE_URL").value_or("https://api.openai.com/v1");
    } else {
      o.secret = env("COMPAT_API_KEY").value_or("");
      o.info.key_var = "COMPAT_API_KEY";
      base = WithV1(p.base_url);
      // Older compatible servers do not know max_completion_tokens.
      o.max_completion_tokens = false;
    }
    if (!o.secret.empty()) o.headers.push_back("Authorization: Bearer " + o.secret);
    o.url = StripSlash(base) + "/chat/completions";
    o.info.endpoint = o.url;
    wire = MakeOpenAiWire(std::move(o));
  } else if (p.kind == "azure") {
    OpenAiWireOptions o;
    o.info.provider = "azure";
    o.info.model = p.model;
    o.info.noun = "deployment";
    o.info.key_var = "AZURE_OPENAI_API_KEY";
    s = need("AZURE_OPENAI_API_KEY", "your Azure OpenAI resource key", &o.secret);
    if (!s.ok()) return s;
    std::string endpoint = cfg.base_url;
    if (endpoint.empty()) {
      s = need("AZURE_OPENAI_ENDPOINT", "your resource's endpoint, e.g. https://NAME.openai.azure.com", &endpoint);
      if (!s.ok()) return s;
    }
    if (!IsHttpUrl(endpoint))
      return Status::Error("azure: AZURE_OPENAI_ENDPOINT '" + endpoint + "' is not an http(s) URL");
    std::string version = env("OPENAI_API_VERSION").value_or(env("AZURE_OPENAI_API_VERSION").value_or("2024-10-21"));
    o.headers.push_back("api-key: " + o.secret);
    o.url = StripSlash(endpoint) + "/openai/deployments/" + p.model + "/chat/completions?api-version=" + version;
    o.info.endpoint = o.url;
    wire = MakeOpenAiWire(std::move(o));
  } else {  // anthropic
    AnthropicWireOptions o;
    o.info.provider = "anthropic";
    o.info.model = p.model;
    o.info.noun = "model";
    o.info.key_var = "ANTHROPIC_API_KEY";
    s = need("ANTHROPIC_API_KEY", "your Anthropic API key", &o.api_key);
    if (!s.ok()) return s;
    std::string base = !cfg.base_url.empty() ? cfg.base_url : env("ANTHROPIC_BASE_URL").value_or("https://api.anthropic.com");
    o.url = StripSlash(base) + "/v1/messages";
    o.info.endpoint = o.url;
    wire = MakeAnthropicWire(std::move(o));
  }
  *out = std::make_unique<HttpChatClient>(std::move(wire), cfg, services);
  return Status::Ok();
}

}  // namespace ax::llm
