// OpenAI backend against a local server speaking Chat Completions, with faults.
#include <gtest/gtest.h>

#include <future>

#include "common/util.h"
#include "fake_server.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

const char* kKey = "sk-test-SECRET-0123456789";

struct OpenAiTest : ::testing::Test {
  FakeServer server;
  ClientConfig cfg = FastConfig({{"OPENAI_API_KEY", kKey}}, server.url() + "/v1");
  std::unique_ptr<LlmClient> client = MustMake("openai:gpt-test", cfg);
};

TEST_F(OpenAiTest, SendsChatCompletionsAndParsesReply) {
  server.Push(Ok(OpenAiReply("```python\nprint(1)\n```", "stop", 100, 50, 20, 64)));
  ChatRequest req = Ask("write a kernel");
  req.max_tokens = 777;
  req.reasoning_effort = "high";
  req.temperature = 0.5;
  ChatResult r = client->ChatSync(req);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "```python\nprint(1)\n```");
  EXPECT_EQ(r.reply.finish, FinishReason::kStop);
  EXPECT_EQ(r.reply.model, "gpt-test-2025");
  EXPECT_EQ(r.usage.input_tokens, 100);
  EXPECT_EQ(r.usage.output_tokens, 50);
  EXPECT_EQ(r.usage.reasoning_tokens, 20);
  EXPECT_EQ(r.usage.cached_input_tokens, 64);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.provider, "openai");
  EXPECT_EQ(r.model, "gpt-test");

  auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/v1/chat/completions");
  EXPECT_EQ(seen[0].header("authorization"), std::string("Bearer ") + kKey);
  auto body = seen[0].json();
  EXPECT_EQ(body["model"], "gpt-test");
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][0]["content"], "You write fast GPU kernels.");
  EXPECT_EQ(body["messages"][1]["role"], "user");
  EXPECT_EQ(body["messages"][1]["content"], "write a kernel");
  EXPECT_EQ(body["max_completion_tokens"], 777);
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_EQ(body["reasoning_effort"], "high");
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.5);
}

TEST_F(OpenAiTest, DefaultMaxTokensAndNoOptionalFields) {
  server.Push(Ok(OpenAiReply("ok")));
  ChatResult r = client->ChatSync(Ask("hi"));
  ASSERT_TRUE(r.ok());
  auto body = server.seen()[0].json();
  EXPECT_EQ(body["max_completion_tokens"], 256);
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("reasoning_effort"));
}

TEST_F(OpenAiTest, RetriesAfter429HonouringRetryAfter) {
  server.Push(HttpStatus(429, R"({"error":{"message":"Rate limit reached","type":"requests"}})",
                     {{"Retry-After", "1"}}));
  server.Push(Ok(OpenAiReply("done")));
  double t0 = NowSeconds();
  ChatResult r = client->ChatSync(Ask("x"));
  double took = NowSeconds() - t0;
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(server.hits(), 2u);
  // Back-off alone would wait 0.02 s; the server asked for a second.
  EXPECT_GE(took, 0.95);
  auto seen = server.seen();
  EXPECT_GE(seen[1].at - seen[0].at, 0.95);
}

TEST_F(OpenAiTest, RetryAfterMsTakesPrecedence) {
  server.Push(HttpStatus(429, R"({"error":{"message":"slow down"}})",
                     {{"retry-after-ms", "300"}, {"Retry-After", "3"}}));
  server.Push(Ok(OpenAiReply("done")));
  double t0 = NowSeconds();
  ChatResult r = client->ChatSync(Ask("x"));
  double took = NowSeconds() - t0;
  ASSERT_TRUE(r.ok());
  EXPECT_GE(took, 0.28);
  EXPECT_LT(took, 2.0);
}

TEST_F(OpenAiTest, RetryAfterBeyondLimitGivesUpAtOnce) {
  server.Push(HttpStatus(429, R"({"error":{"message":"come back tomorrow"}})", {{"Retry-After", "3600"}}));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kRateLimited);
  EXPECT_EQ(server.hits(), 1u);
  EXPECT_NE(r.status.message().find("asked to wait 3600 s"), std::string::npos) << r.status.message();
}

TEST_F(OpenAiTest, Retries500ThenSucceeds) {
  server.Push(HttpStatus(500, R"({"error":{"message":"internal"}})"));
  server.Push(HttpStatus(503, "upstream unavailable"));
  server.Push(Ok(OpenAiReply("third time")));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "third time");
  EXPECT_EQ(r.attempts, 3);
  auto seen = server.seen();
  // Exponential back-off: 0.02 s, then 0.04 s.
  EXPECT_GE(seen[1].at - seen[0].at, 0.018);
  EXPECT_GE(seen[2].at - seen[1].at, 0.038);
}

TEST_F(OpenAiTest, PersistentServerErrorGivesUpAfterMaxAttempts) {
  server.SetDefault([](const Seen&) { return HttpStatus(502, R"({"error":{"message":"bad gateway"}})"); });
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kServer);
  EXPECT_EQ(server.hits(), 3u);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.status.message(), "openai gpt-test: server error HTTP 502 after 3 attempts (bad gateway)");
}

TEST_F(OpenAiTest, HangPastTimeoutIsRetriedThenReported) {
  ClientConfig c = cfg;
  c.timeout_s = 0.3;
  c.retry.max_attempts = 2;
  auto cl = MustMake("openai:gpt-test", c);
  Action hang = Ok(OpenAiReply("too late"));
  hang.delay_s = 3;
  server.SetDefault([hang](const Seen&) { return hang; });
  double t0 = NowSeconds();
  ChatResult r = cl->ChatSync(Ask("x"));
  double took = NowSeconds() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kTimeout);
  EXPECT_EQ(server.hits(), 2u);
  EXPECT_GE(took, 0.6);
  EXPECT_LT(took, 2.5);
  EXPECT_EQ(r.status.message(),
            "openai gpt-test: no reply within 0.3 s after 2 attempts; raise the per-call timeout or check the server");
}

TEST_F(OpenAiTest, HangThenRecovery) {
  ClientConfig c = cfg;
  c.timeout_s = 0.3;
  auto cl = MustMake("openai:gpt-test", c);
  Action hang = Ok(OpenAiReply("late"));
  hang.delay_s = 3;
  server.Push(hang);
  server.Push(Ok(OpenAiReply("on time")));
  ChatResult r = cl->ChatSync(Ask("x"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "on time");
  EXPECT_EQ(r.attempts, 2);
}

TEST_F(OpenAiTest, DroppedConnectionIsRetried) {
  Action drop = Ok(OpenAiReply("a long reply that is cut in the middle"));
  drop.drop = true;
  server.Push(drop);
  server.Push(Ok(OpenAiReply("whole")));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.reply.text, "whole");
  EXPECT_EQ(r.attempts, 2);
}

TEST_F(OpenAiTest, PersistentDropsReportConnectionFailure) {
  server.SetDefault([](const Seen&) {
    Action a = Ok(OpenAiReply("cut cut cut cut cut cut"));
    a.drop = true;
    return a;
  });
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kConnection);
  EXPECT_EQ(server.hits(), 3u);
  EXPECT_NE(r.status.message().find("connection failed after 3 attempts"), std::string::npos)
      << r.status.message();
}

TEST_F(OpenAiTest, MalformedJsonIsRetriedThenReported) {
  server.SetDefault([](const Seen&) { return Ok("{\"choices\": [ {\"message\": "); });
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kMalformed);
  EXPECT_EQ(server.hits(), 3u);
  EXPECT_NE(r.status.message().find("malformed reply after 3 attempts (reply is not JSON"), std::string::npos)
      << r.status.message();
}

TEST_F(OpenAiTest, MalformedOnceThenGood) {
  server.Push(Ok("<html>proxy error</html>"));
  server.Push(Ok(OpenAiReply("fine")));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.attempts, 2);
}

TEST_F(OpenAiTest, TruncatedReplyIsReportedNotRetried) {
  server.Push(Ok(OpenAiReply("def kernel(x):\n    return", "length", 10, 256, 200)));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kTruncated);
  EXPECT_EQ(server.hits(), 1u);
  EXPECT_EQ(r.reply.text, "def kernel(x):\n    return");  // kept for the caller
  EXPECT_EQ(r.usage.output_tokens, 256);
  EXPECT_EQ(r.status.message(),
            "openai gpt-test: reply truncated at the output limit (max_tokens=256, finish_reason 'length', "
            "200 tokens spent on reasoning); raise max_tokens");
}

TEST_F(OpenAiTest, EmptyReplyIsReported) {
  server.Push(Ok(OpenAiReply("  \n ")));
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kEmpty);
  EXPECT_EQ(r.status.message(), "openai gpt-test: empty reply (finish_reason 'stop')");
}

TEST_F(OpenAiTest, NullContentIsEmpty) {
  server.Push(Ok(R"({"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":0}})"));
  ChatResult r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kEmpty);
}

TEST_F(OpenAiTest, AuthFailureFailsFastWithOneLineFix) {
  server.SetDefault([](const Seen&) {
    return HttpStatus(401, std::string(R"({"error":{"message":"Incorrect API key provided: )") + kKey +
                           R"(.\nYou can find your key at the dashboard.","type":"invalid_request_error","code":"invalid_api_key"}})");
  });
  ChatResult r = client->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kAuth);
  EXPECT_EQ(server.hits(), 1u);
  const std::string& m = r.status.message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.find(kKey), std::string::npos) << "key leaked: " << m;
  EXPECT_EQ(m, "openai gpt-test: HTTP 401 authentication failed (Incorrect API key provided: [key].); check OPENAI_API_KEY");
}

TEST_F(OpenAiTest, NoRetryOn400And404And403) {
  server.Push(HttpStatus(400, R"({"error":{"message":"Unsupported parameter: 'max_tokens'"}})"));
  ChatResult r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kBadRequest);
  EXPECT_NE(r.status.message().find("HTTP 400 request rejected (Unsupported parameter: 'max_tokens')"),
            std::string::npos);
  server.Push(HttpStatus(404, R"({"error":{"message":"The model `gpt-test` does not exist"}})"));
  r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kNotFound);
  EXPECT_NE(r.status.message().find("check the model name 'gpt-test'"), std::string::npos) << r.status.message();
  server.Push(HttpStatus(403, R"({"error":{"message":"no access"}})"));
  r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kAuth);
  EXPECT_NE(r.status.message().find("HTTP 403 permission denied"), std::string::npos);
  EXPECT_EQ(server.hits(), 3u);
}

TEST_F(OpenAiTest, InsufficientQuotaIsNotRetried) {
  server.Push(HttpStatus(429, R"({"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}})"));
  ChatResult r = client->ChatSync(Ask("x"));
  EXPECT_EQ(r.error, ErrorKind::kQuota);
  EXPECT_EQ(server.hits(), 1u);
  EXPECT_NE(r.status.message().find("quota exhausted"), std::string::npos);
}

TEST_F(OpenAiTest, ManyConcurrentCallsOnOneLoop) {
  server.SetDefault([](const Seen& s) {
    Action a = Ok(OpenAiReply("echo:" + s.json()["messages"][1]["content"].get<std::string>()));
    a.delay_s = 0.05;
    return a;
  });
  std::vector<std::future<ChatResult>> futs;
  for (int i = 0; i < 12; i++) futs.push_back(client->Chat(Ask("n" + std::to_string(i))));
  double t0 = NowSeconds();
  for (int i = 0; i < 12; i++) {
    ChatResult r = futs[i].get();
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(r.reply.text, "echo:n" + std::to_string(i));
  }
  // Twelve 50 ms replies in parallel, not one after another.
  EXPECT_LT(NowSeconds() - t0, 0.55);
  EXPECT_GE(server.max_concurrent(), 4);
}

TEST_F(OpenAiTest, RejectsBadRequestsBeforeSending) {
  ChatRequest empty;
  ChatResult r = client->ChatSync(empty);
  EXPECT_EQ(r.error, ErrorKind::kConfig);
  ChatRequest bad = Ask("x");
  bad.messages[0].role = "system";
  r = client->ChatSync(bad);
  EXPECT_EQ(r.error, ErrorKind::kConfig);
  EXPECT_NE(r.status.message().find("role 'system'"), std::string::npos);
  EXPECT_EQ(server.hits(), 0u);
}

TEST(OpenAiConnection, RefusedConnectionNamesEndpoint) {
  int port;
  {
    FakeServer s;  // take a free port, then close it
    port = s.port();
  }
  std::string base = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  auto c = MustMake("openai:gpt-test", FastConfig({{"OPENAI_API_KEY", kKey}}, base));
  ChatResult r = c->ChatSync(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error, ErrorKind::kConnection);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_NE(r.status.message().find("check that " + base + "/chat/completions is reachable"), std::string::npos)
      << r.status.message();
}

TEST(OpenAiShutdown, DestroyingClientCompletesCallsInFlight) {
  FakeServer server;
  Action hang = Ok(OpenAiReply("late"));
  hang.delay_s = 5;
  server.SetDefault([hang](const Seen&) { return hang; });
  std::future<ChatResult> fut;
  {
    auto c = MustMake("openai:gpt-test", FastConfig({{"OPENAI_API_KEY", kKey}}, server.url() + "/v1"));
    fut = c->Chat(Ask("x"));
    while (server.hits() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  ChatResult r = fut.get();
  EXPECT_EQ(r.error, ErrorKind::kShutdown);
}

}  // namespace
}  // namespace ax::llm
