// End to end: the compat: backend against a real OpenAI-compatible model
// server (llama.cpp's, through llama-cpp-python) serving a tiny model.
// scripts/llm_e2e.sh sets it up and runs this test; without the server's URL
// in ADAEXPLORE_LLM_E2E_URL the test is skipped.
#include <gtest/gtest.h>

#include <cstdlib>

#include "llm/extract.h"
#include "llm/factory.h"
#include "llm/recorder.h"
#include "test_util.h"

namespace ax::llm {
namespace {

TEST(E2eCompat, RealLlamaCppServer) {
  const char* url = std::getenv("ADAEXPLORE_LLM_E2E_URL");
  if (!url || !*url) GTEST_SKIP() << "ADAEXPLORE_LLM_E2E_URL not set; run scripts/llm_e2e.sh";
  ClientConfig cfg = testing::FastConfig({});
  cfg.timeout_s = 60;
  auto sink = std::make_shared<MemorySink>();
  auto accountant = std::make_shared<Accountant>(PriceTable{}, Budget{});
  RunServices svc;
  svc.sink = sink;
  svc.accountant = accountant;
  auto client = testing::MustMake(std::string("compat:tiny@") + url, cfg, svc);
  ChatRequest req = testing::Ask("Say hello.");
  req.temperature = 0;
  req.max_tokens = 16;
  ChatResult r = client->ChatSync(req);
  ASSERT_TRUE(r.ok()) << r.status.message();
  // The tiny model is built so that its greedy reply is this.
  EXPECT_EQ(r.reply.text, " Hello world!");
  EXPECT_EQ(r.reply.finish, FinishReason::kStop);
  EXPECT_GT(r.usage.input_tokens, 10);
  EXPECT_EQ(r.usage.output_tokens, 3);
  EXPECT_EQ(ExtractCode(r.reply.text).code, "Hello world!\n");
  EXPECT_EQ(sink->records().size(), 1u);
  EXPECT_EQ(accountant->run().output_tokens, 3);

  // A real length stop is reported as truncated, with the text kept.
  req.max_tokens = 2;
  ChatResult t = client->ChatSync(req);
  EXPECT_EQ(t.error, ErrorKind::kTruncated) << t.status.message();
  EXPECT_EQ(t.reply.text, " Hello world");
}

}  // namespace
}  // namespace ax::llm
