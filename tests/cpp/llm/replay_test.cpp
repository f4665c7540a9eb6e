// Recording a live run and replaying it without network.
#include <gtest/gtest.h>

#include "common/util.h"
#include "fake_server.h"
#include "llm/replay_client.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

const char* kKey = "sk-record-SECRET-55555";

struct ReplayTest : ::testing::Test {
  std::string dir = MakeTempDir("/tmp", "ax_llm_replay_");
  std::string file = dir + "/calls.jsonl";
  ~ReplayTest() override { RemoveTree(dir); }
};

TEST_F(ReplayTest, RecordThenReplayGivesIdenticalRepliesWithoutNetwork) {
  std::vector<ChatResult> live;
  std::vector<ChatRequest> asked;
  {
    FakeServer server;
    int n = 0;
    server.SetDefault([&n](const Seen& s) {
      n++;
      // The same prompt gets a different reply each time (sampling).
      return Ok(OpenAiReply("reply " + std::to_string(n) + " to " +
                                s.json()["messages"][1]["content"].get<std::string>(),
                            "stop", 10 * n, 5 * n));
    });
    server.Push(HttpStatus(500, "oops"));  // one retry, recorded in the attempt log
    std::unique_ptr<JsonlRecorder> rec;
    ASSERT_TRUE(JsonlRecorder::Open(file, false, &rec).ok());
    RunServices svc;
    svc.sink = std::move(rec);
    auto c = MustMake("openai:gpt-rec", FastConfig({{"OPENAI_API_KEY", kKey}}, server.url() + "/v1"), svc);
    asked = {Ask("alpha"), Ask("beta"), Ask("alpha"), Ask("gamma", "t2")};
    asked[3].temperature = 0.7;
    for (const auto& q : asked) live.push_back(c->ChatSync(q));
  }  // the server is gone from here on
  auto text = ReadFile(file);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find(kKey), std::string::npos) << "the key must never be recorded";
  std::vector<CallRecord> recs;
  ASSERT_TRUE(ReadRecords(file, &recs).ok());
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].attempt_log.size(), 2u);
  EXPECT_EQ(recs[0].attempt_log[0].http_status, 500);
  EXPECT_EQ(recs[3].task, "t2");

  auto accountant = std::make_shared<Accountant>(PriceTable{}, Budget{});
  auto sink = std::make_shared<MemorySink>();
  RunServices svc;
  svc.accountant = accountant;
  svc.sink = sink;
  auto replay = MustMake("replay:" + file, FastConfig({}), svc);
  for (size_t i = 0; i < asked.size(); i++) {
    ChatResult r = replay->ChatSync(asked[i]);
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(r.reply.text, live[i].reply.text) << i;
    EXPECT_EQ(r.usage.input_tokens, live[i].usage.input_tokens);
    EXPECT_EQ(r.usage.output_tokens, live[i].usage.output_tokens);
    EXPECT_EQ(r.provider, "openai");
    EXPECT_EQ(r.model, "gpt-rec");
  }
  // The second "alpha" got the second recorded reply, not the first again.
  EXPECT_NE(live[0].reply.text, live[2].reply.text);
  EXPECT_EQ(accountant->run().calls, 4);
  EXPECT_EQ(sink->records().size(), 4u);

  // A fifth "alpha" was never recorded.
  ChatResult miss = replay->ChatSync(asked[0]);
  EXPECT_EQ(miss.error, ErrorKind::kReplayMiss);
  EXPECT_NE(miss.status.message().find("this request was recorded 2 times and all were served"), std::string::npos)
      << miss.status.message();
}

TEST_F(ReplayTest, UnknownRequestIsAClearError) {
  CallRecord r;
  r.provider = "anthropic";
  r.model = "claude-x";
  r.request = Ask("known");
  r.request_hash = RequestHash(r.request);
  r.result.reply.text = "known reply";
  ASSERT_TRUE(WriteFile(file, RecordToJsonLine(r) + "\n"));
  auto c = MustMake("replay:" + file, FastConfig({}));
  EXPECT_EQ(c->ChatSync(Ask("known")).reply.text, "known reply");
  ChatRequest other = Ask("known");
  other.max_tokens = 99;  // a different request, by content
  ChatResult m = c->ChatSync(other);
  EXPECT_EQ(m.error, ErrorKind::kReplayMiss);
  EXPECT_NE(m.status.message().find("replay " + file + ": no recorded reply for this request (hash "),
            std::string::npos)
      << m.status.message();
  EXPECT_NE(m.status.message().find("task t1"), std::string::npos);
}

TEST_F(ReplayTest, RecordedFailuresReplayAsFailures) {
  CallRecord r;
  r.provider = "openai";
  r.model = "m";
  r.request = Ask("q");
  r.request_hash = RequestHash(r.request);
  r.result.error = ErrorKind::kTruncated;
  r.result.status = Status::Error("openai m: reply truncated");
  r.result.reply.text = "half";
  r.result.reply.finish = FinishReason::kLength;
  ASSERT_TRUE(WriteFile(file, RecordToJsonLine(r) + "\n"));
  auto c = MustMake("replay:" + file, FastConfig({}));
  ChatResult got = c->ChatSync(Ask("q"));
  EXPECT_EQ(got.error, ErrorKind::kTruncated);
  EXPECT_EQ(got.reply.text, "half");
  EXPECT_EQ(got.reply.finish, FinishReason::kLength);
  EXPECT_EQ(got.status.message(), "openai m: reply truncated");
}

TEST_F(ReplayTest, BadFilesFailWithLineNumbers) {
  CallRecord r;
  r.request = Ask("q");
  r.request_hash = RequestHash(r.request);
  ASSERT_TRUE(WriteFile(file, RecordToJsonLine(r) + "\n\nnot json\n"));
  std::unique_ptr<LlmClient> c;
  Status s = MakeClient("replay:" + file, FastConfig({}), {}, &c);
  EXPECT_EQ(s.message(), "replay: " + file + " line 3: not a JSON object");

  r.request_hash = "0000";
  ASSERT_TRUE(WriteFile(file, RecordToJsonLine(r) + "\n"));
  s = MakeClient("replay:" + file, FastConfig({}), {}, &c);
  EXPECT_NE(s.message().find("request_hash does not match"), std::string::npos) << s.message();
}

TEST(RequestHash, DependsOnContentNotTags) {
  ChatRequest a = Ask("x", "task-a"), b = Ask("x", "task-b");
  b.purpose = "tuner";
  EXPECT_EQ(RequestHash(a), RequestHash(b));
  b.temperature = 0.2;
  EXPECT_NE(RequestHash(a), RequestHash(b));
  ChatRequest c = Ask("x");
  c.system = "other";
  EXPECT_NE(RequestHash(a), RequestHash(c));
  EXPECT_EQ(RequestHash(a).size(), 64u);
}

}  // namespace
}  // namespace ax::llm
