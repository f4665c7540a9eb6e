// Price table, cost, per-task totals and budgets that stop a run.
#include <gtest/gtest.h>

#include "fake_server.h"
#include "llm/accounting.h"
#include "test_util.h"

namespace ax::llm {
namespace {

using namespace testing;

TEST(PriceTable, ParsesAndLooksUpWithPrefixes) {
  PriceTable t;
  ASSERT_TRUE(PriceTable::Parse(R"({"models": {
      "gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25},
      "gpt-4o-mini*": {"input": 0.15, "output": 0.6},
      "claude-*": {"input": 3, "output": 15}}})", &t).ok());
  Price p;
  ASSERT_TRUE(t.Lookup("gpt-4o", &p));
  EXPECT_DOUBLE_EQ(p.output, 10);
  ASSERT_TRUE(t.Lookup("gpt-4o-mini-2024-07-18", &p));
  EXPECT_DOUBLE_EQ(p.input, 0.15);
  ASSERT_TRUE(t.Lookup("claude-sonnet-4-5", &p));
  EXPECT_DOUBLE_EQ(p.output, 15);
  EXPECT_FALSE(t.Lookup("gpt-4o-2024-08-06", &p));  // no prefix entry for it
  EXPECT_FALSE(t.Lookup("llama", &p));
}

TEST(PriceTable, BadTablesSayWhy) {
  PriceTable t;
  EXPECT_EQ(PriceTable::Parse("{", &t).message(), "price table: not valid JSON");
  EXPECT_NE(PriceTable::Parse(R"({"gpt": 1})", &t).message().find("expected {\"models\""), std::string::npos);
  EXPECT_EQ(PriceTable::Parse(R"({"models": {"m": {"input": 1}}})", &t).message(),
            "price table: 'm' needs both \"input\" and \"output\"");
  EXPECT_NE(PriceTable::Parse(R"({"models": {"m": {"input": 1, "output": 2, "ouput": 3}}})", &t)
                .message()
                .find("unknown field 'ouput' in 'm'"),
            std::string::npos);
  EXPECT_NE(PriceTable::Parse(R"({"models": {"m": {"input": -1, "output": 2}}})", &t).message().find("non-negative"),
            std::string::npos);
  EXPECT_NE(PriceTable::Load("/nonexistent.json", &t).message().find("cannot read"), std::string::npos);
}

TEST(Cost, CachedTokensAtTheirOwnPrice) {
  Price p{2.0, 8.0, 0.5};
  Usage u;
  u.input_tokens = 1'000'000;
  u.cached_input_tokens = 400'000;
  u.output_tokens = 250'000;
  // 600k * 2 + 400k * 0.5 + 250k * 8, per million.
  EXPECT_DOUBLE_EQ(CostOf(p, u), 1.2 + 0.2 + 2.0);
  Price no_cache{2.0, 8.0};
  EXPECT_DOUBLE_EQ(CostOf(no_cache, u), 2.0 + 2.0);
}

TEST(Accountant, TotalsPerTaskAndRun) {
  PriceTable t;
  t.Set("m", Price{1.0, 2.0});
  Accountant acc(t, Budget{});
  Usage u;
  u.input_tokens = 1000;
  u.output_tokens = 500;
  u.reasoning_tokens = 100;
  EXPECT_DOUBLE_EQ(acc.Record("a", "m", "", u, 1.5, true), 0.002);
  acc.Record("a", "m", "", u, 0.5, false);
  acc.Record("b", "unpriced", "", u, 1.0, true);
  Totals run = acc.run();
  EXPECT_EQ(run.calls, 3);
  EXPECT_EQ(run.failed_calls, 1);
  EXPECT_EQ(run.input_tokens, 3000);
  EXPECT_EQ(run.reasoning_tokens, 300);
  EXPECT_DOUBLE_EQ(run.cost_usd, 0.004);
  EXPECT_DOUBLE_EQ(run.latency_s, 3.0);
  EXPECT_EQ(run.unpriced_calls, 1);
  EXPECT_EQ(acc.task("a").calls, 2);
  EXPECT_DOUBLE_EQ(acc.task("a").cost_usd, 0.004);
  EXPECT_EQ(acc.task("b").unpriced_calls, 1);
  EXPECT_EQ(acc.tasks().size(), 2u);
}

TEST(Accountant, ReplyModelPricesAnAzureDeployment) {
  PriceTable t;
  t.Set("gpt-4o*", Price{10.0, 10.0});
  Accountant acc(t, Budget{});
  Usage u;
  u.input_tokens = 100000;
  EXPECT_DOUBLE_EQ(acc.Record("a", "my-deployment", "gpt-4o-2024-08-06", u, 0, true), 1.0);
}

TEST(Budget, TokenBudgetStopsTheRunCleanly) {
  FakeServer server;
  server.SetDefault([](const Seen&) { return Ok(OpenAiReply("ok", "stop", 600, 400)); });
  RunServices svc;
  svc.accountant = std::make_shared<Accountant>(PriceTable{}, Budget{2500, 0});
  auto c = MustMake("openai:m", FastConfig({{"OPENAI_API_KEY", "k"}}, server.url() + "/v1"), svc);
  EXPECT_TRUE(c->ChatSync(Ask("1")).ok());
  EXPECT_TRUE(c->ChatSync(Ask("2")).ok());
  EXPECT_TRUE(c->ChatSync(Ask("3")).ok());  // 2000 < 2500 before it: allowed
  ChatResult r = c->ChatSync(Ask("4"));
  EXPECT_EQ(r.error, ErrorKind::kBudget);
  EXPECT_EQ(r.status.message(), "openai m: token budget spent: 3000 of 2500 tokens used; no more LLM calls this run");
  EXPECT_EQ(server.hits(), 3u);  // the refused call never went out
  EXPECT_EQ(r.attempts, 0);
}

TEST(Budget, DollarBudgetStopsAndNeedsPrices) {
  FakeServer server;
  server.SetDefault([](const Seen&) { return Ok(OpenAiReply("ok", "stop", 1'000'000, 0)); });
  PriceTable t;
  t.Set("m", Price{1.0, 4.0});
  RunServices svc;
  svc.accountant = std::make_shared<Accountant>(t, Budget{0, 1.5});
  auto cfg = FastConfig({{"OPENAI_API_KEY", "k"}}, server.url() + "/v1");
  auto c = MustMake("openai:m", cfg, svc);
  ChatResult r1 = c->ChatSync(Ask("1"));
  EXPECT_DOUBLE_EQ(r1.cost_usd, 1.0);
  EXPECT_TRUE(c->ChatSync(Ask("2")).ok());
  ChatResult r3 = c->ChatSync(Ask("3"));
  EXPECT_EQ(r3.error, ErrorKind::kBudget);
  EXPECT_NE(r3.status.message().find("dollar budget spent: $2.0000 of $1.5000"), std::string::npos);
  EXPECT_EQ(server.hits(), 2u);

  std::unique_ptr<LlmClient> unpriced;
  Status s = MakeClient("openai:other", cfg, svc, &unpriced);
  EXPECT_EQ(s.message(),
            "openai: a dollar budget is set but the price table has no entry for model 'other'; add it to the "
            "price table or use a token budget");
}

TEST(Budget, RecordsFailedCallsUsageToo) {
  FakeServer server;
  server.Push(Ok(OpenAiReply("cut", "length", 100, 256)));
  RunServices svc;
  svc.accountant = std::make_shared<Accountant>(PriceTable{}, Budget{});
  auto c = MustMake("openai:m", FastConfig({{"OPENAI_API_KEY", "k"}}, server.url() + "/v1"), svc);
  EXPECT_EQ(c->ChatSync(Ask("1", "taskX")).error, ErrorKind::kTruncated);
  Totals t = svc.accountant->task("taskX");
  EXPECT_EQ(t.calls, 1);
  EXPECT_EQ(t.failed_calls, 1);
  EXPECT_EQ(t.output_tokens, 256);
  EXPECT_GT(t.latency_s, 0);
}

}  // namespace
}  // namespace ax::llm
