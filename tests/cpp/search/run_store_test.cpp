// Tests of the run store: round trips of every table, persistence across
// reopening, concurrent writers (two stores on one file, several threads
// each), and one-line reasons when the file cannot be opened.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/util.h"
#include "search/run_store.h"
#include "search/tree.h"

namespace ax::search {
namespace {

using nlohmann::json;

class RunStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "axstore");
    ASSERT_FALSE(dir_.empty());
    path_ = dir_ + "/run.sqlite";
  }
  void TearDown() override {
    chmod(dir_.c_str(), 0700);
    RemoveTree(dir_);
  }
  std::unique_ptr<RunStore> Open() {
    std::unique_ptr<RunStore> s;
    Status st = RunStore::Open(path_, &s);
    EXPECT_TRUE(st.ok()) << st.message();
    return s;
  }

  std::string dir_, path_;
};

TEST_F(RunStoreTest, OpenCreatesTheFileInWalMode) {
  auto s = Open();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->path(), path_);
  ASSERT_TRUE(s->PutMeta("k", "v").ok());
  EXPECT_TRUE(ReadFile(path_).has_value());
  // WAL mode keeps its log beside the database while a connection is open.
  struct stat st;
  EXPECT_EQ(stat((path_ + "-wal").c_str(), &st), 0) << "no -wal file: the store is not in WAL mode";
}

TEST_F(RunStoreTest, MetaRoundTrip) {
  auto s = Open();
  EXPECT_FALSE(s->GetMeta("config").has_value());
  ASSERT_TRUE(s->PutMeta("config", R"({"steps": 20})").ok());
  ASSERT_TRUE(s->PutMeta("empty", "").ok());
  EXPECT_EQ(s->GetMeta("config"), R"({"steps": 20})");
  EXPECT_EQ(s->GetMeta("empty"), "");
  ASSERT_TRUE(s->PutMeta("config", "replaced").ok());
  EXPECT_EQ(s->GetMeta("config"), "replaced");
}

TEST_F(RunStoreTest, CallsRoundTripPerTaskAndSeq) {
  auto s = Open();
  EXPECT_FALSE(s->GetCall("t1", 0).has_value());
  ASSERT_TRUE(s->PutCall("t1", 0, "propose", "hash0", R"({"seq":0})").ok());
  ASSERT_TRUE(s->PutCall("t1", 1, "revise", "hash1", R"({"seq":1})").ok());
  ASSERT_TRUE(s->PutCall("t2", 0, "tune", "hashX", R"({"other":true})").ok());
  auto c = s->GetCall("t1", 1);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->purpose, "revise");
  EXPECT_EQ(c->request_hash, "hash1");
  EXPECT_EQ(c->record_json, R"({"seq":1})");
  EXPECT_EQ(s->GetCall("t2", 0)->purpose, "tune");
  EXPECT_EQ(s->GetCall("t1", 0)->request_hash, "hash0");
  EXPECT_FALSE(s->GetCall("t1", 2).has_value());
  EXPECT_FALSE(s->GetCall("t3", 0).has_value());
  // A call asked again under the same number replaces the old record.
  ASSERT_TRUE(s->PutCall("t1", 0, "propose", "hash0b", "{}").ok());
  EXPECT_EQ(s->GetCall("t1", 0)->request_hash, "hash0b");
}

TEST_F(RunStoreTest, VerdictsRoundTripPerTask) {
  auto s = Open();
  json v = {{"status", "ok"}, {"correct", true}, {"speedup", {{"eager", 2.5}}}, {"error", "µs ≤ 1 \"quoted\"\n"}};
  ASSERT_TRUE(s->PutVerdict("t1", "abc", v.dump()).ok());
  auto got = s->GetVerdict("t1", "abc");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(json::parse(*got), v);
  EXPECT_FALSE(s->GetVerdict("t2", "abc").has_value()) << "verdicts are per task";
  EXPECT_FALSE(s->GetVerdict("t1", "abd").has_value());
}

TEST_F(RunStoreTest, LargeValuesRoundTrip) {
  auto s = Open();
  std::string big(2 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = '\n';
  ASSERT_TRUE(s->PutCall("t", 0, "propose", "h", big).ok());
  EXPECT_EQ(s->GetCall("t", 0)->record_json, big);
}

Tree SampleTree() {
  Tree t;
  t.AddRoot("reference source", "rhash");
  int a = t.AddChild(0, StepKind::kLarge, "kernel a", "ha", "note a");
  Outcome ok;
  ok.status = "ok";
  ok.correct = true;
  ok.speedup = 1.75;
  ok.runtime_ms = 0.125;
  t.Record(a, ok);
  int b = t.AddChild(a, StepKind::kSmall, "kernel b", "hb", "guidance:\n- faster");
  Outcome bad;
  bad.status = "compile_error";
  bad.error = "SyntaxError: invalid syntax";
  t.Record(b, bad);
  return t;
}

TEST_F(RunStoreTest, TreesRoundTrip) {
  auto s = Open();
  EXPECT_FALSE(s->GetTree("t1").has_value());
  Tree t = SampleTree();
  ASSERT_TRUE(s->PutTree("t1", t.ToJson()).ok());
  auto got = s->GetTree("t1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, t.ToJson());
  EXPECT_EQ(Tree::FromJson(*got), t);
  // Later writes replace the tree.
  int c = t.AddChild(0, StepKind::kLarge, "kernel c", "hc");
  Outcome o;
  o.status = "mismatch";
  t.Record(c, o);
  ASSERT_TRUE(s->PutTree("t1", t.ToJson()).ok());
  EXPECT_EQ(Tree::FromJson(*s->GetTree("t1")).size(), 4u);
  EXPECT_FALSE(s->GetTree("t2").has_value());
}

TEST_F(RunStoreTest, TasksRoundTripAndListSorted) {
  auto s = Open();
  EXPECT_FALSE(s->GetTask("b").has_value());
  EXPECT_TRUE(s->TaskNames().empty());
  ASSERT_TRUE(s->PutTask("b", "found", json{{"speedup", {{"eager", 2.0}}}, {"steps", 10}}).ok());
  ASSERT_TRUE(s->PutTask("a", "none", json::object()).ok());
  ASSERT_TRUE(s->PutTask("c", "stopped: budget", json{{"steps", 3}}).ok());
  auto b = s->GetTask("b");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ((*b)["status"], "found");
  EXPECT_EQ((*b)["summary"]["steps"], 10);
  EXPECT_DOUBLE_EQ((*b)["summary"]["speedup"]["eager"].get<double>(), 2.0);
  EXPECT_EQ(s->TaskNames(), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(s->PutTask("b", "none", json::object()).ok());
  EXPECT_EQ((*s->GetTask("b"))["status"], "none");
  EXPECT_EQ(s->TaskNames().size(), 3u);
}

TEST_F(RunStoreTest, EverythingSurvivesReopening) {
  Tree t = SampleTree();
  {
    auto s = Open();
    ASSERT_TRUE(s->PutMeta("seed", "42").ok());
    ASSERT_TRUE(s->PutCall("t", 3, "tune", "h3", "{\"r\":3}").ok());
    ASSERT_TRUE(s->PutVerdict("t", "c1", "{\"status\":\"ok\"}").ok());
    ASSERT_TRUE(s->PutTree("t", t.ToJson()).ok());
    ASSERT_TRUE(s->PutTask("t", "found", json{{"best_node", 1}}).ok());
  }
  auto s = Open();
  EXPECT_EQ(s->GetMeta("seed"), "42");
  EXPECT_EQ(s->GetCall("t", 3)->record_json, "{\"r\":3}");
  EXPECT_EQ(s->GetVerdict("t", "c1"), "{\"status\":\"ok\"}");
  EXPECT_EQ(Tree::FromJson(*s->GetTree("t")), t);
  EXPECT_EQ((*s->GetTask("t"))["summary"]["best_node"], 1);
}

TEST_F(RunStoreTest, TwoStoresOnOneFileFromManyThreadsLoseNothing) {
  auto a = Open(), b = Open();
  ASSERT_TRUE(a && b);
  constexpr int kThreadsPerStore = 3, kWrites = 120;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(2 * kThreadsPerStore);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2 * kThreadsPerStore; ++w) {
    RunStore* s = w % 2 ? b.get() : a.get();
    threads.emplace_back([&, s, w] {
      const std::string task = "task" + std::to_string(w);
      for (int i = 0; i < kWrites; ++i) {
        std::vector<Status> st = {
            s->PutCall(task, i, "propose", "h" + std::to_string(i), "{\"i\":" + std::to_string(i) + "}"),
            s->PutVerdict(task, "c" + std::to_string(i), "{\"w\":" + std::to_string(w) + "}"),
            s->PutMeta("k" + std::to_string(w) + "_" + std::to_string(i), task),
        };
        if (i % 10 == 0) {
          st.push_back(s->PutTree(task, json{{"i", i}}));
          // Reads interleaved with the other store's writes.
          if (!s->GetCall(task, i).has_value()) st.push_back(Status::Error("read-back of call failed"));
        }
        for (const auto& x : st) {
          if (!x.ok()) {
            ++failures;
            errors[w] = x.message();
          }
        }
      }
      if (!s->PutTask(task, "found", json{{"w", w}}).ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e;
  ASSERT_EQ(failures.load(), 0);
  a.reset();
  b.reset();

  auto c = Open();
  for (int w = 0; w < 2 * kThreadsPerStore; ++w) {
    const std::string task = "task" + std::to_string(w);
    for (int i = 0; i < kWrites; ++i) {
      auto call = c->GetCall(task, i);
      ASSERT_TRUE(call.has_value()) << task << " call " << i;
      EXPECT_EQ(call->record_json, "{\"i\":" + std::to_string(i) + "}");
      EXPECT_EQ(c->GetVerdict(task, "c" + std::to_string(i)), "{\"w\":" + std::to_string(w) + "}");
      EXPECT_EQ(c->GetMeta("k" + std::to_string(w) + "_" + std::to_string(i)), task);
    }
    EXPECT_EQ((*c->GetTree(task))["i"], (kWrites - 1) / 10 * 10) << "the last tree written wins";
  }
  EXPECT_EQ(c->TaskNames().size(), static_cast<size_t>(2 * kThreadsPerStore));
}

void ExpectOneLineFailure(const std::string& path, const std::string& what) {
  std::unique_ptr<RunStore> s;
  Status st = RunStore::Open(path, &s);
  ASSERT_FALSE(st.ok()) << what << ": opened " << path;
  EXPECT_FALSE(s) << what;
  EXPECT_FALSE(st.message().empty()) << what;
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << what << ": " << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << what << ": the reason should name the file: "
                                                         << st.message();
}

TEST_F(RunStoreTest, MissingDirectoryFailsWithOneLine) {
  ExpectOneLineFailure(dir_ + "/no/such/dir/run.sqlite", "missing directory");
}

TEST_F(RunStoreTest, ParentIsAFileFailsWithOneLine) {
  ASSERT_TRUE(WriteFile(dir_ + "/plain", "x"));
  ExpectOneLineFailure(dir_ + "/plain/run.sqlite", "parent is a file");
}

TEST_F(RunStoreTest, ReadOnlyDirectoryFailsWithOneLine) {
  const std::string ro = dir_ + "/ro";
  ASSERT_EQ(mkdir(ro.c_str(), 0500), 0);
  std::string path = ro + "/run.sqlite";
  if (access(ro.c_str(), W_OK) == 0) {
    // Running as root: permissions do not stop us. /proc refuses new files
    // for everyone.
    path = "/proc/adaexplore-run-store-test.sqlite";
  }
  ExpectOneLineFailure(path, "read-only directory");
}

TEST_F(RunStoreTest, NotADatabaseFailsWithOneLine) {
  ASSERT_TRUE(WriteFile(path_, std::string(4096, 'z')));
  ExpectOneLineFailure(path_, "not a database");
}

}  // namespace
}  // namespace ax::search
