// Anthropic backend against a local server speaking the Messages API.
#include <gtest/gtest.h>

#include "common/util.h"
#include "fake_server.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

const char* kKey = "sk-ant-test-KEY-987654321";

struct AnthropicTest : ::testing::Test {
  FakeServer server;
  ClientConfig cfg = FastConfig({{"ANTHROPIC_API_KEY", kKey}}, server.url());
  std::unique_ptr<LlmClient> client = MustMake("anthropic:claude-test", cfg);
};

TEST_F(AnthropicTest, SendsMessagesRequestAndParsesReply) {
  server.Push(Ok(AnthropicReply("```python\nx = 1\n```", "end_turn", 30, 70, 500)));
  ChatRequest req = Ask("write it");
  req.messages.push_back({"assistant", "draft"});
  req.messages.push_back({"user", "improve it"});
  req.thinking_budget = 2048;
  req.max_tokens = 4096;
  req.stop = {"END"};
  ChatResult r = client->ChatSync(req);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "```python\nx = 1\n```");  // the thinking block is left out
  EXPECT_EQ(r.reply.finish, FinishReason::kStop);
  EXPECT_EQ(r.reply.raw_finish, "end_turn");
  EXPECT_EQ(r.usage.input_tokens, 530);  // uncached 30 + cache reads 500
  EXPECT_EQ(r.usage.cached_input_tokens, 500);
  EXPECT_EQ(r.usage.output_tokens, 70);
  EXPECT_EQ(r.reply.model, "claude-test-1");

  auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/v1/messages");
  EXPECT_EQ(seen[0].header("x-api-key"), kKey);
  EXPECT_EQ(seen[0].header("anthropic-version"), "2023-06-01");
  EXPECT_EQ(seen[0].header("authorization"), "");
  auto body = seen[0].json();
  EXPECT_EQ(body["model"], "claude-test");
  EXPECT_EQ(body["system"], "You write fast GPU kernels.");
  EXPECT_EQ(body["max_tokens"], 4096);
  ASSERT_EQ(body["messages"].size(), 3u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][1]["role"], "assistant");
  EXPECT_EQ(body["thinking"]["type"], "enabled");
  EXPECT_EQ(body["thinking"]["budget_tokens"], 2048);
  EXPECT_EQ(body["stop_sequences"][0], "END");
}

TEST_F(AnthropicTest, MaxTokensStopIsTruncated) {
  server.Push(Ok(AnthropicReply("partial kernel", "max_tokens", 10, 256)));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kTruncated);
  EXPECT_EQ(r.reply.text, "partial kernel");
  EXPECT_EQ(server.hits(), 1u);
  EXPECT_EQ(r.status.message(),
            "anthropic claude-test: reply truncated at the output limit (max_tokens=256, finish_reason "
            "'max_tokens'); raise max_tokens");
}

TEST_F(AnthropicTest, OverloadedIsRetried) {
  server.Push(HttpStatus(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"));
  server.Push(HttpStatus(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"slow"}})",
                         {{"retry-after", "0.2"}}));
  server.Push(Ok(AnthropicReply("ok")));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.attempts, 3);
  auto seen = server.seen();
  EXPECT_GE(seen[2].at - seen[1].at, 0.19);
}

TEST_F(AnthropicTest, AuthErrorNamesTheVariable) {
  server.Push(HttpStatus(401, R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})"));
  ChatResult r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kAuth);
  EXPECT_EQ(server.hits(), 1u);
  EXPECT_EQ(r.status.message(),
            "anthropic claude-test: HTTP 401 authentication failed (invalid x-api-key); check ANTHROPIC_API_KEY");
}

TEST_F(AnthropicTest, ErrorObjectWith200IsMalformed) {
  server.SetDefault([](const Seen&) {
    return Ok(R"({"type":"error","error":{"type":"api_error","message":"boom"}})");
  });
  ChatResult r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kMalformed);
  EXPECT_NE(r.status.message().find("reply carries an error: boom"), std::string::npos) << r.status.message();
}

TEST_F(AnthropicTest, HangAndDropAreRetried) {
  ClientConfig c = cfg;
  c.timeout_s = 0.3;
  auto cl = MustMake("anthropic:claude-test", c);
  Action hang = Ok(AnthropicReply("late"));
  hang.delay_s = 3;
  Action drop = Ok(AnthropicReply("cut in the middle of the body"));
  drop.drop = true;
  server.Push(hang);
  server.Push(drop);
  server.Push(Ok(AnthropicReply("finally")));
  ChatResult r = cl->ChatSync(Ask("x"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "finally");
  EXPECT_EQ(r.attempts, 3);
}

TEST_F(AnthropicTest, EmptyTextIsEmpty) {
  server.Push(Ok(R"({"type":"message","role":"assistant","model":"m","content":[],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":0}})"));
  ChatResult r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kEmpty);
}

}  // namespace
}  // namespace ax::llm
