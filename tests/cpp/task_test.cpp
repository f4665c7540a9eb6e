#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/util.h"
#include "judge/task.h"

namespace ax {
namespace {

namespace fs = std::filesystem;

std::string TaskSource(const std::string& tag) {
  return "import torch\nimport torch.nn as nn\n\n"
         "class Model(nn.Module):\n"
         "    \"\"\"" + tag + "\"\"\"\n"
         "    def __init__(self):\n        super().__init__()\n\n"
         "    def forward(self, x):\n        return torch.relu(x)\n\n"
         "def get_inputs():\n    return [torch.randn(4, 4)]\n\n"
         "def get_init_inputs():\n    return []\n";
}

class TaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "ax_task_test_");
    ASSERT_FALSE(dir_.empty());
    // Task paths come back absolute and normalised ("/tmp//x" -> "/tmp/x").
    dir_ = fs::path(dir_).lexically_normal().string();
  }
  void TearDown() override { RemoveTree(dir_); }

  // Writes a task file (creating folders) and returns its path.
  std::string Put(const std::string& rel, const std::string& content) {
    fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    EXPECT_TRUE(WriteFile(p.string(), content)) << p;
    return p.string();
  }
  std::string PutTask(const std::string& rel) { return Put(rel, TaskSource(rel)); }

  static std::vector<std::string> Names(const std::vector<TaskRef>& v) {
    std::vector<std::string> out;
    for (auto& t : v) out.push_back(t.name);
    return out;
  }

  std::string dir_;
};

// ---------------------------------------------------------------- ReadTask

TEST_F(TaskTest, ReadTaskFillsEverything) {
  std::string p = PutTask("19_ReLU.py");
  TaskRef t;
  Status s = ReadTask(p, &t);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.path, p);
  EXPECT_TRUE(fs::path(t.path).is_absolute());
  EXPECT_EQ(t.name, "19_ReLU");
  EXPECT_EQ(t.source, TaskSource("19_ReLU.py"));
  EXPECT_EQ(t.hash, Sha256Hex(t.source));
  EXPECT_EQ(t.hash.size(), 64u);
}

TEST_F(TaskTest, ReadTaskPathIsAbsoluteAndNormal) {
  std::string p = PutTask("sub/7_X.py");
  fs::create_directories(dir_ + "/other");
  TaskRef t;
  ASSERT_TRUE(ReadTask(dir_ + "/other/../sub/./7_X.py", &t).ok());
  EXPECT_EQ(t.path, p);

  // A relative path is made absolute against the working directory.
  fs::path old = fs::current_path();
  fs::current_path(dir_);
  TaskRef r;
  Status s = ReadTask("sub/7_X.py", &r);
  fs::current_path(old);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.path, p);
}

TEST_F(TaskTest, ReadTaskMissingFile) {
  TaskRef t;
  Status s = ReadTask(dir_ + "/nope.py", &t);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "task file not found: " + dir_ + "/nope.py");
  s = ReadTask(dir_, &t);  // a folder is not a task file
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("task file not found"), std::string::npos);
}

TEST_F(TaskTest, ReadTaskRejectsNonTasks) {
  struct Case {
    std::string content, expect;
  } cases[] = {
      {"print('hello')\n", "no class Model"},
      {"class ModelNew(nn.Module):\n    pass\ndef get_inputs():\n    pass\ndef get_init_inputs():\n    pass\n",
       "no class Model"},
      {"# class Model(nn.Module):\ndef get_inputs():\n    pass\ndef get_init_inputs():\n    pass\n",
       "no class Model"},
      {"class Model(nn.Module):\n    pass\ndef get_init_inputs():\n    return []\n", "no get_inputs"},
      {"class Model(nn.Module):\n    pass\ndef get_inputs_x():\n    pass\ndef get_init_inputs():\n    return []\n",
       "no get_inputs"},
      {"class Model(nn.Module):\n    pass\ndef get_inputs():\n    return []\n", "no get_init_inputs"},
      {"", "no class Model"},
  };
  int i = 0;
  for (auto& c : cases) {
    std::string p = Put("bad" + std::to_string(i++) + ".py", c.content);
    TaskRef t;
    Status s = ReadTask(p, &t);
    ASSERT_FALSE(s.ok()) << c.content;
    EXPECT_NE(s.message().find("not a KernelBench task (" + c.expect + ")"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  }
}

TEST_F(TaskTest, ReadTaskAcceptsVariants) {
  // class Model: without bases, extra spaces, and defs indented at top level
  // of another block are all recognised.
  std::string p = Put("ok.py",
                      "class Model :\n    pass\n"
                      "def get_inputs ():\n    return []\n"
                      "if True:\n    def get_init_inputs():\n        return []\n");
  TaskRef t;
  Status s = ReadTask(p, &t);
  EXPECT_TRUE(s.ok()) << s.message();
  std::string q = Put("first.py",
                      "class Model(nn.Module): pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n");
  EXPECT_TRUE(ReadTask(q, &t).ok());
}

TEST_F(TaskTest, ReadTaskLargeWhitespaceDoesNotCrash) {
  std::string p = Put("ws.py", std::string(200000, '\n') + TaskSource("ws"));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    TaskRef t;
    Status s = ReadTask(p, &t);
    _exit(s.ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "ReadTask crashed, status " << status;
}

TEST_F(TaskTest, HashIsStableAndContentBased) {
  std::string a = PutTask("1_A.py");
  std::string b = Put("copy/1_A.py", ReadFile(a).value());
  std::string c = Put("2_C.py", TaskSource("1_A.py") + "\n");
  TaskRef ta, ta2, tb, tc;
  ASSERT_TRUE(ReadTask(a, &ta).ok());
  ASSERT_TRUE(ReadTask(a, &ta2).ok());
  ASSERT_TRUE(ReadTask(b, &tb).ok());
  ASSERT_TRUE(ReadTask(c, &tc).ok());
  EXPECT_EQ(ta.hash, ta2.hash);
  EXPECT_EQ(ta.hash, tb.hash);  // same content elsewhere: same hash
  EXPECT_NE(ta.hash, tc.hash);  // one byte more: different hash
  EXPECT_EQ(ta.hash, Sha256Hex(TaskSource("1_A.py")));
}

// ---------------------------------------------------------------- ResolveTasks

TEST_F(TaskTest, ResolveSingleFile) {
  std::string p = PutTask("3_Conv.py");
  std::vector<TaskRef> out;
  Status s = ResolveTasks(p, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "3_Conv");
  EXPECT_EQ(out[0].path, p);
}

TEST_F(TaskTest, ResolveAppendsToOutput) {
  std::string p = PutTask("3_Conv.py");
  std::vector<TaskRef> out(1);
  out[0].name = "existing";
  ASSERT_TRUE(ResolveTasks(p, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "existing");
  EXPECT_EQ(out[1].name, "3_Conv");
}

TEST_F(TaskTest, ResolveFolderSortsByNumericPrefix) {
  std::string f = dir_ + "/tasks";
  for (const char* n : {"10_Ten.py", "2_Two.py", "1_One.py", "100_Hundred.py", "2b_TwoB.py", "20_Twenty.py"}) {
    PutTask(std::string("tasks/") + n);
  }
  Put("tasks/_helper.py", "x = 1\n");        // underscore files are skipped
  Put("tasks/__init__.py", "");
  Put("tasks/notes.txt", "not python");      // other extensions are skipped
  fs::create_directories(f + "/5_dir.py");   // folders are skipped
  PutTask("tasks/sub/4_Nested.py");          // no recursion
  std::vector<TaskRef> out;
  Status s = ResolveTasks(f, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Names(out), (std::vector<std::string>{"1_One", "2_Two", "2b_TwoB", "10_Ten", "20_Twenty", "100_Hundred"}));
  for (auto& t : out) {
    EXPECT_EQ(fs::path(t.path).parent_path(), fs::path(f));
    EXPECT_EQ(t.hash, Sha256Hex(t.source));
  }
  // Trailing slash: the same.
  std::vector<TaskRef> out2;
  ASSERT_TRUE(ResolveTasks(f + "/", &out2).ok());
  EXPECT_EQ(Names(out2), Names(out));
}

TEST_F(TaskTest, ResolveFolderWithoutNumbersSortsByName) {
  for (const char* n : {"b.py", "a.py", "c.py"}) PutTask(std::string("t/") + n);
  std::vector<TaskRef> out;
  ASSERT_TRUE(ResolveTasks(dir_ + "/t", &out).ok());
  EXPECT_EQ(Names(out), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(TaskTest, ResolveEmptyFolderIsAnError) {
  fs::create_directories(dir_ + "/empty");
  Put("empty/readme.md", "hi");
  std::vector<TaskRef> out;
  Status s = ResolveTasks(dir_ + "/empty", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "no .py task files in " + dir_ + "/empty");
}

TEST_F(TaskTest, ResolveFolderWithANonTaskFails) {
  PutTask("mixed/1_Good.py");
  Put("mixed/2_Bad.py", "print('no model here')\n");
  std::vector<TaskRef> out;
  Status s = ResolveTasks(dir_ + "/mixed", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a KernelBench task"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2_Bad.py"), std::string::npos) << s.message();
}

TEST_F(TaskTest, ResolveMissingSpec) {
  std::vector<TaskRef> out;
  Status s = ResolveTasks(dir_ + "/does_not_exist.py", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "no such task file or folder: " + dir_ + "/does_not_exist.py");
  EXPECT_TRUE(out.empty());
  // A numeric last component under a missing folder is not a level lookup.
  s = ResolveTasks(dir_ + "/nolevel/19", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no such task file or folder"), std::string::npos) << s.message();
}

TEST_F(TaskTest, ResolveNonTaskFile) {
  std::string p = Put("readme.py", "print(1)\n");
  std::vector<TaskRef> out;
  Status s = ResolveTasks(p, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a KernelBench task"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
}

class LevelTest : public TaskTest {
 protected:
  void SetUp() override {
    TaskTest::SetUp();
    PutTask("kb/level1/1_Square.py");
    PutTask("kb/level1/19_ReLU.py");
    PutTask("kb/level1/190_Other.py");
    PutTask("kb/level1/2.py");
    Put("kb/level1/3_Notes.txt", "not a task");
    PutTask("kb/level2/5_A.py");
    PutTask("kb/level2/5_B.py");
    root_ = dir_ + "/kb";
  }
  std::string root_;
};

TEST_F(LevelTest, LevelFolderAndId) {
  struct Case {
    std::string id, name;
  } cases[] = {{"19", "19_ReLU"}, {"1", "1_Square"}, {"190", "190_Other"}, {"2", "2"}};
  for (auto& c : cases) {
    std::vector<TaskRef> out;
    Status s = ResolveTasks(root_ + "/level1/" + c.id, &out);
    ASSERT_TRUE(s.ok()) << c.id << ": " << s.message();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].name, c.name);
    EXPECT_EQ(out[0].path, root_ + "/level1/" + c.name + ".py");
  }
}

TEST_F(LevelTest, LevelFolderRelativeToWorkingDirectory) {
  fs::path old = fs::current_path();
  fs::current_path(root_);
  std::vector<TaskRef> out;
  Status s = ResolveTasks("level1/19", &out);
  fs::current_path(old);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "19_ReLU");
  EXPECT_EQ(out[0].path, root_ + "/level1/19_ReLU.py");
}

TEST_F(LevelTest, KernelBenchSpec) {
  std::vector<TaskRef> out;
  Status s = ResolveTasks("kernelbench:" + root_ + ":1:19", &out);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "19_ReLU");
  // The same file as the folder form.
  std::vector<TaskRef> out2;
  ASSERT_TRUE(ResolveTasks(root_ + "/level1/19", &out2).ok());
  EXPECT_EQ(out2[0].path, out[0].path);
  EXPECT_EQ(out2[0].hash, out[0].hash);
}

TEST_F(LevelTest, KernelBenchSpecRootWithColons) {
  std::string odd = dir_ + "/a:b";
  fs::create_directories(odd);
  fs::copy(root_, odd + "/kb", fs::copy_options::recursive);
  std::vector<TaskRef> out;
  Status s = ResolveTasks("kernelbench:" + odd + "/kb:1:19", &out);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].path, odd + "/kb/level1/19_ReLU.py");
}

TEST_F(LevelTest, AmbiguousId) {
  std::vector<TaskRef> out;
  Status s = ResolveTasks(root_ + "/level2/5", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "problem id 5 is ambiguous in " + root_ + "/level2");
  s = ResolveTasks("kernelbench:" + root_ + ":2:5", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ambiguous"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
}

TEST_F(LevelTest, MissingId) {
  std::vector<TaskRef> out;
  Status s = ResolveTasks(root_ + "/level1/7", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "no problem 7 in " + root_ + "/level1");
  // A non-.py file with the right prefix does not count.
  s = ResolveTasks(root_ + "/level1/3", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "no problem 3 in " + root_ + "/level1");
  s = ResolveTasks("kernelbench:" + root_ + ":1:7", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no problem 7"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
}

TEST_F(LevelTest, KernelBenchSpecErrors) {
  std::vector<TaskRef> out;
  Status s = ResolveTasks("kernelbench:" + root_, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "expected kernelbench:ROOT:LEVEL:ID, got kernelbench:" + root_);
  s = ResolveTasks("kernelbench:", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expected kernelbench:ROOT:LEVEL:ID"), std::string::npos) << s.message();
  s = ResolveTasks("kernelbench:1:19", &out);  // no root
  ASSERT_FALSE(s.ok());
  s = ResolveTasks("kernelbench:" + root_ + ":one:19", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "LEVEL and ID must be numbers in kernelbench:" + root_ + ":one:19");
  s = ResolveTasks("kernelbench:" + root_ + ":1:", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("must be numbers"), std::string::npos) << s.message();
  s = ResolveTasks("kernelbench:" + root_ + ":1:19_ReLU", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("must be numbers"), std::string::npos) << s.message();
  s = ResolveTasks("kernelbench:" + root_ + ":9:1", &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "no such KernelBench level folder: " + root_ + "/level9");
  EXPECT_TRUE(out.empty());
}

TEST_F(LevelTest, KernelBenchSpecWithEmptyRootAndOneNumber) {
  PutTask("cwd/level19/19_Trap.py");
  fs::path old = fs::current_path();
  fs::current_path(dir_ + "/cwd");
  std::vector<TaskRef> out;
  Status s = ResolveTasks("kernelbench::19", &out);
  fs::current_path(old);
  ASSERT_FALSE(s.ok()) << "resolved to " << (out.empty() ? "" : out[0].path);
  EXPECT_NE(s.message().find("expected kernelbench:ROOT:LEVEL:ID"), std::string::npos) << s.message();
}

// ---------------------------------------------------------------- the real dataset

class KernelBenchDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::weakly_canonical(fs::path(ADAEXPLORE_SOURCE_DIR "/../shared/datasets/kernelbench")).string();
    if (!fs::is_directory(root_ + "/level1")) GTEST_SKIP() << "no KernelBench dataset at " << root_;
  }
  std::string root_;
};

TEST_F(KernelBenchDatasetTest, Level1Id19IsReLU) {
  std::vector<TaskRef> a, b;
  Status s = ResolveTasks(root_ + "/level1/19", &a);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].name, "19_ReLU");
  EXPECT_EQ(a[0].path, root_ + "/level1/19_ReLU.py");
  s = ResolveTasks("kernelbench:" + root_ + ":1:19", &b);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].name, "19_ReLU");
  EXPECT_EQ(b[0].hash, a[0].hash);
  EXPECT_EQ(a[0].hash, Sha256Hex(ReadFile(a[0].path).value()));
  // Relative to the dataset root, as a user would type it.
  fs::path old = fs::current_path();
  fs::current_path(root_);
  std::vector<TaskRef> c;
  s = ResolveTasks("level1/19", &c);
  fs::current_path(old);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name, "19_ReLU");
}

TEST_F(KernelBenchDatasetTest, EveryLevelOneProblemResolves) {
  std::vector<TaskRef> out;
  Status s = ResolveTasks(root_ + "/level1", &out);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_GE(out.size(), 19u);
  EXPECT_EQ(out[0].name.rfind("1_", 0), 0u) << out[0].name;
  EXPECT_EQ(out[18].name, "19_ReLU");
  long prev = 0;
  for (auto& t : out) {
    long n = std::stol(t.name);
    EXPECT_GE(n, prev) << t.name;
    prev = n;
  }
}

}  // namespace
}  // namespace ax
