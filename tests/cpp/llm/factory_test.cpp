// Proposer spellings and the setup errors a person sees.
#include <gtest/gtest.h>

#include "llm/factory.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

Status Make(const std::string& spec, std::map<std::string, std::string> env = {}) {
  std::unique_ptr<LlmClient> c;
  return MakeClient(spec, FastConfig(std::move(env)), {}, &c);
}

TEST(ParseSpec, AllSpellings) {
  ParsedSpec p;
  ASSERT_TRUE(ParseSpec("openai:gpt-4o", &p).ok());
  EXPECT_EQ(p.kind, "openai");
  EXPECT_EQ(p.model, "gpt-4o");
  ASSERT_TRUE(ParseSpec("azure:prod-deploy", &p).ok());
  EXPECT_EQ(p.model, "prod-deploy");
  ASSERT_TRUE(ParseSpec("anthropic:claude-sonnet-4-5", &p).ok());
  EXPECT_EQ(p.kind, "anthropic");
  ASSERT_TRUE(ParseSpec("compat:meta-llama/Llama-3.1-8B@http://10.0.0.1:8000/v1/", &p).ok());
  EXPECT_EQ(p.model, "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(p.base_url, "http://10.0.0.1:8000/v1");
  ASSERT_TRUE(ParseSpec("replay:/tmp/run.jsonl", &p).ok());
  EXPECT_EQ(p.file, "/tmp/run.jsonl");
}

TEST(ParseSpec, BadSpellingsSayWhy) {
  ParsedSpec p;
  EXPECT_EQ(ParseSpec("builtin", &p).message(),
            "proposer 'builtin' is not an LLM and needs no client; use it without an LLM backend");
  EXPECT_NE(ParseSpec("gpt-4o", &p).message().find("unknown proposer 'gpt-4o'; expected openai:MODEL"),
            std::string::npos);
  EXPECT_NE(ParseSpec("gemini:pro", &p).message().find("unknown proposer kind 'gemini'"), std::string::npos);
  EXPECT_EQ(ParseSpec("openai:", &p).message(), "openai: no model given; expected openai:MODEL");
  EXPECT_EQ(ParseSpec("azure:", &p).message(), "azure: no deployment given; expected azure:DEPLOYMENT");
  EXPECT_NE(ParseSpec("compat:llama", &p).message().find("expected compat:MODEL@BASE_URL"), std::string::npos);
  EXPECT_NE(ParseSpec("compat:@http://x", &p).message().find("expected compat:MODEL@BASE_URL"), std::string::npos);
  EXPECT_EQ(ParseSpec("replay:", &p).message(), "replay: expected replay:FILE");
  EXPECT_FALSE(ParseSpec("openai:gpt 4o", &p).ok());
}

TEST(MakeClient, MissingKeysNameTheVariable) {
  EXPECT_EQ(Make("openai:gpt-4o").message(), "openai: OPENAI_API_KEY is not set; export your OpenAI API key");
  EXPECT_EQ(Make("anthropic:claude").message(),
            "anthropic: ANTHROPIC_API_KEY is not set; export your Anthropic API key");
  EXPECT_EQ(Make("azure:d").message(), "azure: AZURE_OPENAI_API_KEY is not set; export your Azure OpenAI resource key");
  EXPECT_NE(Make("azure:d", {{"AZURE_OPENAI_API_KEY", "k"}}).message().find("AZURE_OPENAI_ENDPOINT is not set"),
            std::string::npos);
  EXPECT_NE(Make("azure:d", {{"AZURE_OPENAI_API_KEY", "k"}, {"AZURE_OPENAI_ENDPOINT", "myres.openai.azure.com"}})
                .message()
                .find("is not an http(s) URL"),
            std::string::npos);
  EXPECT_TRUE(Make("compat:m@http://127.0.0.1:1/v1").ok());  // no key needed
  EXPECT_TRUE(Make("openai:gpt-4o", {{"OPENAI_API_KEY", "sk"}}).ok());
  EXPECT_NE(Make("replay:/nonexistent/file.jsonl").message().find("cannot read recording /nonexistent/file.jsonl"),
            std::string::npos);
}

TEST(MakeClient, DescribeMatchesSpec) {
  std::unique_ptr<LlmClient> c;
  ASSERT_TRUE(MakeClient("openai:o3-mini", FastConfig({{"OPENAI_API_KEY", "sk"}}), {}, &c).ok());
  EXPECT_EQ(c->Describe(), "openai:o3-mini");
}

}  // namespace
}  // namespace ax::llm
