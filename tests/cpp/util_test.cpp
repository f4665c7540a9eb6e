#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/install_paths.h"
#include "common/util.h"

namespace ax {
namespace {

namespace fs = std::filesystem;

// A private scratch folder per test, removed afterwards.
class UtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "ax_util_test_");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { RemoveTree(dir_); }
  std::string dir_;
};

// ---------------------------------------------------------------- Sha256Hex

TEST(Sha256HexTest, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256HexTest, FormatIsLowercaseHex64) {
  std::string h = Sha256Hex("hello world");
  ASSERT_EQ(h.size(), 64u);
  for (char c : h) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << h;
}

TEST(Sha256HexTest, BinarySafe) {
  // Embedded NUL bytes are hashed, not treated as a terminator.
  std::string with_nul("ab\0c", 4);
  EXPECT_NE(Sha256Hex(with_nul), Sha256Hex("ab"));
  EXPECT_NE(Sha256Hex(with_nul), Sha256Hex(std::string("ab\0d", 4)));
  EXPECT_EQ(Sha256Hex(with_nul), Sha256Hex(std::string("ab\0c", 4)));
}

TEST(Sha256HexTest, DistinguishesNearbyInputs) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(Sha256Hex("x" + std::to_string(i)));
  EXPECT_EQ(seen.size(), 100u);
}

// ---------------------------------------------------------------- ComputeStats

TEST(ComputeStatsTest, EmptySampleIsAllZero) {
  Stats s = ComputeStats({});
  EXPECT_EQ(s.n, 0u);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.stdev, 0);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 0);
  EXPECT_EQ(s.p10, 0);
  EXPECT_EQ(s.p90, 0);
}

TEST(ComputeStatsTest, SingleValue) {
  Stats s = ComputeStats({5.0});
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.median, 5.0);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.stdev, 0.0);  // sample stdev of one value is defined as 0 here
  EXPECT_DOUBLE_EQ(s.min, 5.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.p10, 5.0);
  EXPECT_DOUBLE_EQ(s.p90, 5.0);
}

TEST(ComputeStatsTest, FourValuesUnsortedInput) {
  // Sorted: 1 2 3 4. Linear interpolation between order statistics:
  // p10 at position 0.3 -> 1.3, median at 1.5 -> 2.5, p90 at 2.7 -> 3.7.
  // Sample variance: (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3.
  Stats s = ComputeStats({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.stdev, std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  EXPECT_NEAR(s.p10, 1.3, 1e-12);
  EXPECT_NEAR(s.p90, 3.7, 1e-12);
}

TEST(ComputeStatsTest, EightValues) {
  // 2 4 4 4 5 5 7 9: mean 5, sum of squared deviations 32 -> sample stdev sqrt(32/7).
  // median at position 3.5 -> 4.5; p10 at 0.7 -> 3.4; p90 at 6.3 -> 7.6.
  Stats s = ComputeStats({9, 2, 5, 4, 7, 4, 5, 4});
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.stdev, std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_NEAR(s.p10, 3.4, 1e-12);
  EXPECT_NEAR(s.p90, 7.6, 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
}

TEST(ComputeStatsTest, OddCountMedianIsMiddleElement) {
  Stats s = ComputeStats({3, 100, 1, 2, 50});
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.mean, 156.0 / 5.0);
}

TEST(ComputeStatsTest, ConstantSampleHasZeroSpread) {
  Stats s = ComputeStats(std::vector<double>(10, 0.25));
  EXPECT_DOUBLE_EQ(s.stdev, 0.0);
  EXPECT_DOUBLE_EQ(s.p10, 0.25);
  EXPECT_DOUBLE_EQ(s.p90, 0.25);
  EXPECT_DOUBLE_EQ(s.median, 0.25);
}

TEST(ComputeStatsTest, QuantilesAreOrdered) {
  std::vector<double> v;
  for (int i = 0; i < 37; ++i) v.push_back(std::fmod(i * 7.3, 11.0));
  Stats s = ComputeStats(v);
  EXPECT_LE(s.min, s.p10);
  EXPECT_LE(s.p10, s.median);
  EXPECT_LE(s.median, s.p90);
  EXPECT_LE(s.p90, s.max);
}

// ---------------------------------------------------------------- Trim / FirstLine

TEST(TrimTest, Basics) {
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("   "), "");
  EXPECT_EQ(Trim(" \t\r\n"), "");
  EXPECT_EQ(Trim("abc"), "abc");
  EXPECT_EQ(Trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(Trim("\n\nx\n\n"), "x");
  EXPECT_EQ(Trim("a \n b"), "a \n b");  // inner whitespace kept
}

TEST(FirstLineTest, Basics) {
  EXPECT_EQ(FirstLine(""), "");
  EXPECT_EQ(FirstLine("single"), "single");
  EXPECT_EQ(FirstLine("one\ntwo\nthree"), "one");
  EXPECT_EQ(FirstLine("one\r\ntwo"), "one");
  EXPECT_EQ(FirstLine("\n\n  hello world  \nsecond"), "hello world");
  EXPECT_EQ(FirstLine("trailing   \t\nx"), "trailing");
}

TEST(FirstLineTest, Limit) {
  EXPECT_EQ(FirstLine("abcdef", 3), "abc...");
  EXPECT_EQ(FirstLine("abc", 3), "abc");
  EXPECT_EQ(FirstLine("abcdef\nxyz", 4), "abcd...");
  std::string long_line(400, 'x');
  std::string fl = FirstLine(long_line);
  EXPECT_EQ(fl, std::string(300, 'x') + "...");
}

// ---------------------------------------------------------------- files

TEST_F(UtilTest, WriteThenReadRoundTripsBinary) {
  std::string path = dir_ + "/f.bin";
  std::string data("a\0b\nc\xff", 6);
  ASSERT_TRUE(WriteFile(path, data));
  auto got = ReadFile(path);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, data);
  // Overwrite truncates.
  ASSERT_TRUE(WriteFile(path, "z"));
  EXPECT_EQ(ReadFile(path).value_or("?"), "z");
  ASSERT_TRUE(WriteFile(path, ""));
  EXPECT_EQ(ReadFile(path).value_or("?"), "");
}

TEST_F(UtilTest, ReadFileMissingIsNullopt) { EXPECT_FALSE(ReadFile(dir_ + "/nope").has_value()); }

TEST_F(UtilTest, WriteFileIntoMissingFolderFails) {
  EXPECT_FALSE(WriteFile(dir_ + "/no/such/dir/f", "x"));
  EXPECT_FALSE(WriteFile(dir_, "x"));  // a directory
}

TEST_F(UtilTest, ReadFileOfDirectoryIsNullopt) {
  EXPECT_FALSE(ReadFile(dir_).has_value());
}

TEST_F(UtilTest, MakeTempDirIsPrivateAndUnique) {
  mode_t old = umask(0);  // even a permissive umask must not widen it
  std::string a = MakeTempDir(dir_, "pfx_");
  std::string b = MakeTempDir(dir_, "pfx_");
  umask(old);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a, b);
  for (const auto& d : {a, b}) {
    struct stat st;
    ASSERT_EQ(stat(d.c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u) << d;
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_EQ(fs::path(d).parent_path(), fs::path(dir_));
    EXPECT_EQ(fs::path(d).filename().string().rfind("pfx_", 0), 0u) << d;
    EXPECT_TRUE(fs::is_empty(d));
  }
}

TEST_F(UtilTest, MakeTempDirCreatesMissingParents) {
  std::string parent = dir_ + "/x/y/z";
  std::string d = MakeTempDir(parent, "t");
  ASSERT_FALSE(d.empty());
  EXPECT_TRUE(fs::is_directory(d));
  EXPECT_EQ(fs::path(d).parent_path(), fs::path(parent));
}

TEST_F(UtilTest, MakeTempDirFailsUnderAFile) {
  ASSERT_TRUE(WriteFile(dir_ + "/file", "x"));
  EXPECT_EQ(MakeTempDir(dir_ + "/file", "t"), "");
}

TEST_F(UtilTest, RemoveTreeRemovesNestedAndIgnoresErrors) {
  std::string root = dir_ + "/tree";
  fs::create_directories(root + "/a/b/c");
  ASSERT_TRUE(WriteFile(root + "/a/b/c/f", "x"));
  ASSERT_TRUE(WriteFile(root + "/g", "y"));
  chmod((root + "/a/b").c_str(), 0500);
  RemoveTree(root);
  // Root may remove a read-only folder's entries; others may not: accept either,
  // but a writable tree must go.
  if (geteuid() == 0) {
    EXPECT_FALSE(fs::exists(root));
  }
  chmod((root + "/a/b").c_str(), 0700);
  RemoveTree(root);
  EXPECT_FALSE(fs::exists(root));
  RemoveTree(root);        // missing: no throw
  RemoveTree("");          // ignored
  RemoveTree(dir_ + "/no/such");
}

TEST(NowSecondsTest, MonotonicAndAdvances) {
  double a = NowSeconds();
  usleep(20000);
  double b = NowSeconds();
  EXPECT_GE(b - a, 0.015);
  EXPECT_LT(b - a, 5.0);
  double prev = NowSeconds();
  for (int i = 0; i < 1000; ++i) {
    double t = NowSeconds();
    EXPECT_GE(t, prev);
    prev = t;
  }
}

// Where an installed binary or the Python extension looks for its prompts
// and worker: the install prefix's share/, then the wheel's package folder,
// then the source tree, in that order.
TEST(InstallPathsTest, LayoutsInSearchOrder) {
  auto l = ResourceLayouts("/opt/ax/bin", "/src");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].prompts, "/opt/ax/share/adaexplore/prompts");
  EXPECT_EQ(l[0].worker, "/opt/ax/share/adaexplore/python");
  EXPECT_EQ(l[1].prompts, "/opt/ax/bin/prompts");
  EXPECT_EQ(l[1].worker, "/opt/ax");
  EXPECT_EQ(l[2].prompts, "/src/prompts");
  EXPECT_EQ(l[2].worker, "/src/python");
  // Without a code folder, only the source tree.
  auto only = ResourceLayouts("", "/src");
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].worker, "/src/python");
}

TEST(InstallPathsTest, EnvironmentOverridesAndTheTestBinaryFindsTheSourceTree) {
  EXPECT_FALSE(CodeDir().empty());
  setenv("ADAEXPLORE_PROMPTS_DIR", "/elsewhere/prompts", 1);
  EXPECT_EQ(PromptsDir(), "/elsewhere/prompts");
  unsetenv("ADAEXPLORE_PROMPTS_DIR");
  unsetenv("ADAEXPLORE_WORKER_DIR");
  EXPECT_EQ(PromptsDir(), SourceDir() + "/prompts");  // build/ holds no prompts of its own
  EXPECT_EQ(WorkerDir(), SourceDir() + "/python");
}

}  // namespace
}  // namespace ax
