#include "cli/memory_cmd.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "adapt/memory.h"
#include "common/util.h"

namespace ax::cli {
namespace {

class MemoryCmd : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("/tmp", "memory-cmd-test");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(WriteFile(P("a.txt"), "You cannot do A.||5.0\nYou cannot do B.||1.0\nYou cannot do C.||3.0\n"));
  }
  void TearDown() override { RemoveTree(dir_); }
  std::string P(const std::string& f) const { return dir_ + "/" + f; }

  // Runs the command; returns the exit code, with stdout and stderr.
  int Run(MemoryFlags f, std::string* out = nullptr, std::string* err = nullptr) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int rc = RunMemoryCommand(f);
    std::string o = ::testing::internal::GetCapturedStdout();
    std::string e = ::testing::internal::GetCapturedStderr();
    if (out) *out = o;
    if (err) *err = e;
    return rc;
  }

  // Parses a command line as main would.
  int Parse(std::vector<std::string> args, MemoryFlags* f) {
    CLI::App app{"test"};
    CLI::App* sub = nullptr;
    RegisterMemoryCommand(app, f, &sub);
    std::vector<const char*> argv = {"adaexplore"};
    for (auto& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
    } catch (const CLI::ParseError& e) {
      return 2;
    }
    return *sub ? 0 : 1;
  }

  std::string dir_;
};

TEST_F(MemoryCmd, ParsesEverySubcommand) {
  MemoryFlags f;
  ASSERT_EQ(Parse({"memory", "show", P("a.txt"), "--min-score", "3", "--json"}, &f), 0);
  EXPECT_EQ(f.action, "show");
  EXPECT_EQ(f.file, P("a.txt"));
  EXPECT_EQ(f.min_score, 3);
  EXPECT_TRUE(f.json);
  MemoryFlags g;
  ASSERT_EQ(Parse({"memory", "prune", P("a.txt"), "--max-rules", "2"}, &g), 0);
  EXPECT_EQ(g.action, "prune");
  EXPECT_EQ(g.max_rules, 2);
  EXPECT_TRUE(std::isnan(g.min_score));
  MemoryFlags h;
  ASSERT_EQ(Parse({"memory", "import", "x.txt", "y.json"}, &h), 0);
  EXPECT_EQ(h.action, "import");
  EXPECT_EQ(h.src, "x.txt");
  EXPECT_EQ(h.dst, "y.json");
  MemoryFlags i;
  EXPECT_EQ(Parse({"memory"}, &i), 2);  // a subcommand is required
  EXPECT_EQ(Parse({"memory", "show"}, &i), 2);
}

TEST_F(MemoryCmd, ShowListsBestFirst) {
  MemoryFlags f;
  f.action = "show";
  f.file = P("a.txt");
  std::string out;
  ASSERT_EQ(Run(f, &out), 0);
  EXPECT_NE(out.find("3 rules, total score 9; 2 go into prompts"), std::string::npos) << out;
  size_t a = out.find("You cannot do A."), c = out.find("You cannot do C."), b = out.find("You cannot do B.");
  ASSERT_NE(b, std::string::npos);
  EXPECT_LT(a, c);
  EXPECT_LT(c, b);

  f.min_score = 3;
  f.json = true;
  ASSERT_EQ(Run(f, &out), 0);
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["rules"].size(), 2u);
  EXPECT_EQ(j["rules"][0]["rule"], "You cannot do A.");
  EXPECT_EQ(j["rules"][1]["score"], 3.0);
  EXPECT_EQ(j["rules_in_file"], 3);
}

TEST_F(MemoryCmd, ImportConvertsAndMerges) {
  MemoryFlags f;
  f.action = "import";
  f.src = P("a.txt");
  f.dst = P("m.json");
  std::string out;
  ASSERT_EQ(Run(f, &out), 0) << out;
  adapt::Memory m;
  ASSERT_TRUE(m.Load(P("m.json")).ok());
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(*ReadFile(P("m.json")))["format"], "adaexplore-memory");

  // Merge: a duplicate (normalised) adds its score, a new rule is appended.
  ASSERT_TRUE(WriteFile(P("b.txt"), "you cannot do a||2\nYou cannot do D.||4\n"));
  f.src = P("b.txt");
  ASSERT_EQ(Run(f, &out), 0);
  EXPECT_NE(out.find("1 new, 1 merged"), std::string::npos) << out;
  ASSERT_TRUE(m.Load(P("m.json")).ok());
  EXPECT_EQ(m.size(), 4u);
  EXPECT_EQ(m.Find("You cannot do A.")->score, 7);

  // JSON -> text.
  f.src = P("m.json");
  f.dst = P("back.txt");
  ASSERT_EQ(Run(f), 0);
  EXPECT_EQ(*ReadFile(P("back.txt")),
            "You cannot do A.||7.0\nYou cannot do B.||1.0\nYou cannot do C.||3.0\nYou cannot do D.||4.0\n");

  // Importing a file into itself would double it.
  f.src = f.dst;
  std::string err;
  EXPECT_EQ(Run(f, nullptr, &err), 2);
  EXPECT_NE(err.find("same file"), std::string::npos);
}

TEST_F(MemoryCmd, ExportReplaces) {
  ASSERT_TRUE(WriteFile(P("old.json"), "{\"rules\": [{\"rule\": \"You cannot do Z.\", \"score\": 9}]}"));
  MemoryFlags f;
  f.action = "export";
  f.src = P("a.txt");
  f.dst = P("old.json");
  ASSERT_EQ(Run(f), 0);
  adapt::Memory m;
  ASSERT_TRUE(m.Load(P("old.json")).ok());
  EXPECT_EQ(m.size(), 3u);
  EXPECT_FALSE(m.Find("You cannot do Z.").has_value());
  f.dst = "-";
  std::string out;
  ASSERT_EQ(Run(f, &out), 0);
  EXPECT_EQ(out, *ReadFile(P("a.txt")));
}

TEST_F(MemoryCmd, PruneInPlace) {
  MemoryFlags f;
  f.action = "prune";
  f.file = P("a.txt");
  f.min_score = 2;
  std::string out;
  ASSERT_EQ(Run(f, &out), 0);
  EXPECT_NE(out.find("pruned 1 rules; 2 left"), std::string::npos) << out;
  EXPECT_EQ(*ReadFile(P("a.txt")), "You cannot do A.||5.0\nYou cannot do C.||3.0\n");
  f.min_score = std::numeric_limits<double>::quiet_NaN();
  f.max_rules = 1;
  ASSERT_EQ(Run(f), 0);
  EXPECT_EQ(*ReadFile(P("a.txt")), "You cannot do A.||5.0\n");
}

TEST_F(MemoryCmd, BadInputIsExit2WithOneLine) {
  ASSERT_TRUE(WriteFile(P("bad.txt"), "You cannot do A.||5\nthis line has no score\n"));
  struct Case {
    MemoryFlags f;
    const char* says;
  };
  auto mk = [](std::string action, std::string file, std::string src, std::string dst) {
    MemoryFlags f;
    f.action = action;
    f.file = file;
    f.src = src;
    f.dst = dst;
    return f;
  };
  MemoryFlags prune_nothing = mk("prune", P("a.txt"), "", "");
  MemoryFlags negative = mk("prune", P("a.txt"), "", "");
  negative.max_rules = -1;
  std::vector<Case> cases = {
      {mk("show", P("missing.txt"), "", ""), "cannot read memory file"},
      {mk("show", P("bad.txt"), "", ""), "line 2"},
      {mk("show", dir_, "", ""), "is a folder"},
      {mk("import", "", P("missing.json"), P("x.txt")), "cannot read"},
      {mk("import", "", P("a.txt"), P("x.yaml")), "must end in .txt"},
      {mk("export", "", P("a.txt"), P("a.txt/x.json")), "cannot write memory file"},
      {prune_nothing, "--min-score"},
      {negative, "--max-rules"},
      {mk("frobnicate", "", "", ""), "unknown action"},
  };
  for (auto& c : cases) {
    std::string err;
    EXPECT_EQ(Run(c.f, nullptr, &err), 2) << c.says;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << err;  // one line
  }
  // Nothing was written by the failed commands.
  EXPECT_FALSE(std::filesystem::exists(P("x.txt")));
  EXPECT_EQ(*ReadFile(P("a.txt")), "You cannot do A.||5.0\nYou cannot do B.||1.0\nYou cannot do C.||3.0\n");
}

}  // namespace
}  // namespace ax::cli
