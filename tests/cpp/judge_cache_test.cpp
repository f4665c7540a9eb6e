#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/util.h"
#include "judge/judge_cache.h"

namespace ax {
namespace {

namespace fs = std::filesystem;

class JudgeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "ax_cache_test_");
    ASSERT_FALSE(dir_.empty());
    path_ = dir_ + "/cache.db";
  }
  void TearDown() override { RemoveTree(dir_); }
  std::string dir_, path_;
};

TEST_F(JudgeCacheTest, PutGetRoundTrip) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  EXPECT_TRUE(c.error().empty());
  EXPECT_FALSE(c.Get("verdicts", "k1").has_value());
  c.Put("verdicts", "k1", R"({"status":"correct","speedup":1.5})");
  auto v = c.Get("verdicts", "k1");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, R"({"status":"correct","speedup":1.5})");
  EXPECT_FALSE(c.Get("verdicts", "k2").has_value());
}

TEST_F(JudgeCacheTest, PutReplaces) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  c.Put("baselines", "k", "one");
  c.Put("baselines", "k", "two");
  EXPECT_EQ(c.Get("baselines", "k").value_or("?"), "two");
}

TEST_F(JudgeCacheTest, TablesAreSeparate) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  c.Put("verdicts", "same", "v");
  c.Put("baselines", "same", "b");
  c.Put("tasks", "same", "t");
  EXPECT_EQ(c.Get("verdicts", "same").value_or("?"), "v");
  EXPECT_EQ(c.Get("baselines", "same").value_or("?"), "b");
  EXPECT_EQ(c.Get("tasks", "same").value_or("?"), "t");
}

TEST_F(JudgeCacheTest, UnknownTablesAreRejected) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  c.Put("verdicts", "k", "v");
  for (const char* t : {"", "nope", "Verdicts", "verdicts; DROP TABLE verdicts; --", "sqlite_master"}) {
    c.Put(t, "k", "evil");
    EXPECT_FALSE(c.Get(t, "k").has_value()) << t;
  }
  EXPECT_EQ(c.Get("verdicts", "k").value_or("?"), "v");
}

TEST_F(JudgeCacheTest, OddKeysAndValues) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  std::string big(2 << 20, 'x');
  big[12345] = 'y';
  const std::vector<std::pair<std::string, std::string>> kv = {
      {"quote'key\"", "it's \"quoted\""},
      {"unicode-ключ-鍵", "значение ✓"},
      {"", "empty key"},
      {"empty value", ""},
      {"newlines\n\t", "a\nb\r\nc"},
      {"big", big},
      {std::string(1000, 'k'), "long key"},
  };
  for (auto& [k, v] : kv) c.Put("tasks", k, v);
  for (auto& [k, v] : kv) {
    auto got = c.Get("tasks", k);
    ASSERT_TRUE(got.has_value()) << k.substr(0, 40);
    EXPECT_EQ(got->size(), v.size()) << k.substr(0, 40);
    EXPECT_TRUE(*got == v) << k.substr(0, 40);
  }
}

TEST_F(JudgeCacheTest, PersistsAcrossReopen) {
  {
    JudgeCache c(path_);
    ASSERT_TRUE(c.enabled()) << c.error();
    for (int i = 0; i < 50; ++i) c.Put("verdicts", "k" + std::to_string(i), "v" + std::to_string(i));
    c.Put("baselines", "b", "bv");
  }
  EXPECT_TRUE(fs::exists(path_));
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(c.Get("verdicts", "k" + std::to_string(i)).value_or("?"), "v" + std::to_string(i));
  }
  EXPECT_EQ(c.Get("baselines", "b").value_or("?"), "bv");
}

TEST_F(JudgeCacheTest, CreatesParentFolders) {
  std::string p = dir_ + "/a/b/c/cache.db";
  {
    JudgeCache c(p);
    ASSERT_TRUE(c.enabled()) << c.error();
    c.Put("tasks", "k", "v");
  }
  EXPECT_TRUE(fs::exists(p));
  JudgeCache c(p);
  EXPECT_EQ(c.Get("tasks", "k").value_or("?"), "v");
}

TEST_F(JudgeCacheTest, UsesWriteAheadLog) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  c.Put("verdicts", "k", "v");
  // While a connection is open in WAL mode the -wal file exists next to the db.
  EXPECT_TRUE(fs::exists(path_ + "-wal"));
  // And the header says WAL (file format version bytes 18 and 19 are 2).
  auto head = ReadFile(path_);
  ASSERT_TRUE(head.has_value());
  ASSERT_GE(head->size(), 20u);
  EXPECT_EQ(head->substr(0, 15), "SQLite format 3");
  EXPECT_EQ((*head)[18], 2);
  EXPECT_EQ((*head)[19], 2);
}

TEST_F(JudgeCacheTest, ConcurrentThreadsOneInstanceLoseNothing) {
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  constexpr int kThreads = 8, kPer = 150;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&c, t] {
      for (int i = 0; i < kPer; ++i) {
        std::string k = "t" + std::to_string(t) + "_" + std::to_string(i);
        c.Put("verdicts", k, "v" + k);
        // Interleave reads with the writes.
        if (i % 10 == 0) (void)c.Get("verdicts", k);
      }
    });
  }
  for (auto& t : ts) t.join();
  int found = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPer; ++i) {
      std::string k = "t" + std::to_string(t) + "_" + std::to_string(i);
      if (c.Get("verdicts", k).value_or("") == "v" + k) ++found;
    }
  }
  EXPECT_EQ(found, kThreads * kPer);
}

TEST_F(JudgeCacheTest, ConcurrentInstancesSameFileLoseNothing) {
  // Each thread opens its own connection on the same file, as separate judge
  // processes would; every write must land despite the lock contention.
  constexpr int kInstances = 4, kPer = 150;
  std::vector<std::thread> ts;
  std::vector<std::string> errors(kInstances);
  for (int t = 0; t < kInstances; ++t) {
    ts.emplace_back([this, t, &errors] {
      JudgeCache c(path_);
      if (!c.enabled()) {
        errors[t] = c.error();
        return;
      }
      for (int i = 0; i < kPer; ++i) {
        std::string k = "i" + std::to_string(t) + "_" + std::to_string(i);
        c.Put(i % 2 ? "verdicts" : "baselines", k, "v" + k);
        if (i % 7 == 0) (void)c.Get("verdicts", "i0_1");
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < kInstances; ++t) EXPECT_EQ(errors[t], "") << "instance " << t;
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  int found = 0;
  for (int t = 0; t < kInstances; ++t) {
    for (int i = 0; i < kPer; ++i) {
      std::string k = "i" + std::to_string(t) + "_" + std::to_string(i);
      if (c.Get(i % 2 ? "verdicts" : "baselines", k).value_or("") == "v" + k) ++found;
    }
  }
  EXPECT_EQ(found, kInstances * kPer);
}

// Judges that start together all open a cache file that does not exist yet:
// creating its schema and switching it to WAL conflict in ways SQLite does
// not hand to its busy handler. Every one of them must still get a cache.
TEST_F(JudgeCacheTest, InstancesCreatingANewFileTogetherAllOpenIt) {
  constexpr int kFiles = 25, kInstances = 6;
  for (int f = 0; f < kFiles; ++f) {
    const std::string path = dir_ + "/new" + std::to_string(f) + ".db";
    std::vector<std::string> errors(kInstances);
    std::vector<std::thread> ts;
    std::atomic<int> ready{0};
    for (int t = 0; t < kInstances; ++t) {
      ts.emplace_back([&, t] {
        ++ready;
        while (ready.load() < kInstances) std::this_thread::yield();
        JudgeCache c(path);
        if (!c.enabled()) errors[t] = c.error();
        c.Put("tasks", "k" + std::to_string(t), "v");
      });
    }
    for (auto& th : ts) th.join();
    for (int t = 0; t < kInstances; ++t) ASSERT_EQ(errors[t], "") << "file " << f << ", instance " << t;
    JudgeCache c(path);
    for (int t = 0; t < kInstances; ++t) EXPECT_EQ(c.Get("tasks", "k" + std::to_string(t)).value_or(""), "v");
  }
}

TEST_F(JudgeCacheTest, ConcurrentProcessesSameFileLoseNothing) {
  constexpr int kPer = 200;
  // Created first so both processes race only on the writes, then each side
  // opens its own connection (a connection must not cross fork).
  { JudgeCache init(path_); ASSERT_TRUE(init.enabled()) << init.error(); }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    JudgeCache c(path_);
    if (!c.enabled()) _exit(2);
    for (int i = 0; i < kPer; ++i) c.Put("verdicts", "child_" + std::to_string(i), "c" + std::to_string(i));
    _exit(0);
  }
  {
    JudgeCache c(path_);
    ASSERT_TRUE(c.enabled()) << c.error();
    for (int i = 0; i < kPer; ++i) c.Put("verdicts", "parent_" + std::to_string(i), "p" + std::to_string(i));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  JudgeCache c(path_);
  ASSERT_TRUE(c.enabled()) << c.error();
  int found = 0;
  for (int i = 0; i < kPer; ++i) {
    if (c.Get("verdicts", "child_" + std::to_string(i)).value_or("") == "c" + std::to_string(i)) ++found;
    if (c.Get("verdicts", "parent_" + std::to_string(i)).value_or("") == "p" + std::to_string(i)) ++found;
  }
  EXPECT_EQ(found, 2 * kPer);
}

void ExpectDisabledAndHarmless(JudgeCache& c, const std::string& path) {
  EXPECT_FALSE(c.enabled());
  EXPECT_FALSE(c.error().empty());
  EXPECT_NE(c.error().find(path), std::string::npos) << c.error();
  c.Put("verdicts", "k", "v");
  c.Put("tasks", "k", "v");
  EXPECT_FALSE(c.Get("verdicts", "k").has_value());
  EXPECT_FALSE(c.Get("tasks", "k").has_value());
}

TEST_F(JudgeCacheTest, DirectoryPathDisablesCache) {
  JudgeCache c(dir_);
  ExpectDisabledAndHarmless(c, dir_);
  EXPECT_TRUE(fs::is_directory(dir_));
}

TEST_F(JudgeCacheTest, ProcPathDisablesCache) {
  std::string p = "/proc/no_such_folder_for_ax/cache.db";
  JudgeCache c(p);
  ExpectDisabledAndHarmless(c, p);
}

TEST_F(JudgeCacheTest, PathUnderAFileDisablesCache) {
  ASSERT_TRUE(WriteFile(dir_ + "/file", "x"));
  std::string p = dir_ + "/file/cache.db";
  JudgeCache c(p);
  ExpectDisabledAndHarmless(c, p);
}

TEST_F(JudgeCacheTest, CorruptFileDisablesCacheWithoutDamage) {
  std::string garbage(8192, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 131 + 7) & 0xff);
  ASSERT_TRUE(WriteFile(path_, garbage));
  {
    JudgeCache c(path_);
    ExpectDisabledAndHarmless(c, path_);
  }
  // The file is left as it was.
  EXPECT_EQ(ReadFile(path_).value_or(""), garbage);
}

TEST_F(JudgeCacheTest, DisabledInstanceDoesNotAffectAGoodOne) {
  JudgeCache bad(dir_);
  ASSERT_FALSE(bad.enabled());
  JudgeCache good(path_);
  ASSERT_TRUE(good.enabled()) << good.error();
  good.Put("verdicts", "k", "v");
  bad.Put("verdicts", "k", "other");
  EXPECT_EQ(good.Get("verdicts", "k").value_or("?"), "v");
}

}  // namespace
}  // namespace ax
