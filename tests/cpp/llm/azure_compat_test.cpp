// Azure OpenAI and OpenAI-compatible backends: their paths, headers, fields.
#include <gtest/gtest.h>

#include "fake_server.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

TEST(Azure, UsesDeploymentPathApiVersionAndApiKeyHeader) {
  FakeServer server;
  auto cfg = FastConfig({{"AZURE_OPENAI_API_KEY", "az-key-123456"},
                         {"AZURE_OPENAI_ENDPOINT", server.url() + "/"},
                         {"OPENAI_API_VERSION", "2025-01-01-preview"}});
  auto c = MustMake("azure:my-gpt4o", cfg);
  server.Push(Ok(OpenAiReply("hello", "stop", 7, 3)));
  ChatResult r = c->ChatSync(Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.provider, "azure");
  EXPECT_EQ(r.model, "my-gpt4o");
  auto s = server.seen().at(0);
  EXPECT_EQ(s.path, "/openai/deployments/my-gpt4o/chat/completions");
  EXPECT_EQ(s.params["api-version"], "2025-01-01-preview");
  EXPECT_EQ(s.header("api-key"), "az-key-123456");
  EXPECT_EQ(s.header("authorization"), "");
  EXPECT_EQ(s.json()["max_completion_tokens"], 256);
}

TEST(Azure, DefaultApiVersionAndErrors) {
  FakeServer server;
  auto cfg = FastConfig({{"AZURE_OPENAI_API_KEY", "az-key-123456"}, {"AZURE_OPENAI_ENDPOINT", server.url()}});
  auto c = MustMake("azure:missing-deploy", cfg);
  server.Push(HttpStatus(404, R"({"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}})"));
  ChatResult r = c->ChatSync(Ask("hi"));
  EXPECT_EQ(r.error, ErrorKind::kNotFound);
  EXPECT_EQ(server.seen().at(0).params["api-version"], "2024-10-21");
  EXPECT_NE(r.status.message().find("azure missing-deploy: HTTP 404 not found (The API deployment for this resource does not exist.); check the deployment name 'missing-deploy'"),
            std::string::npos)
      << r.status.message();
  server.Push(HttpStatus(401, R"({"error":{"code":"401","message":"Access denied due to invalid subscription key."}})"));
  r = c->ChatSync(Ask("hi"));
  EXPECT_EQ(r.error, ErrorKind::kAuth);
  EXPECT_NE(r.status.message().find("check AZURE_OPENAI_API_KEY"), std::string::npos);
  EXPECT_EQ(server.hits(), 2u);
}

TEST(Compat, PostsToBaseUrlWithMaxTokensAndNoKey) {
  FakeServer server;
  auto c = MustMake("compat:qwen2.5-coder:7b@" + server.url() + "/v1", FastConfig({}));
  server.Push(Ok(OpenAiReply("local reply")));
  ChatResult r = c->ChatSync(Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(c->Describe(), "compat:qwen2.5-coder:7b");
  auto s = server.seen().at(0);
  EXPECT_EQ(s.path, "/v1/chat/completions");
  EXPECT_EQ(s.header("authorization"), "");
  auto body = s.json();
  EXPECT_EQ(body["model"], "qwen2.5-coder:7b");
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_FALSE(body.contains("max_completion_tokens"));
}

TEST(Compat, BareHostGetsV1AndKeyFromCompatApiKey) {
  FakeServer server;
  auto c = MustMake("compat:m@" + server.url(), FastConfig({{"COMPAT_API_KEY", "local-token"}}));
  server.Push(Ok(OpenAiReply("ok")));
  ASSERT_TRUE(c->ChatSync(Ask("hi")).ok());
  auto s = server.seen().at(0);
  EXPECT_EQ(s.path, "/v1/chat/completions");
  EXPECT_EQ(s.header("authorization"), "Bearer local-token");
}

TEST(Compat, ContentPartsAndMissingUsageAreAccepted) {
  FakeServer server;
  auto c = MustMake("compat:m@" + server.url() + "/v1", FastConfig({}));
  server.Push(Ok(R"({"choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":null}]})"));
  ChatResult r = c->ChatSync(Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "ab");
  EXPECT_EQ(r.usage.total(), 0);
}

}  // namespace
}  // namespace ax::llm
