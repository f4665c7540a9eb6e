// Reductions over a GEMM's columns without Python (src/builtin/gemm_reduce.cpp):
// which reductions qualify, the tile that holds the columns, and the kernel
// lines for each kind.
#include <gtest/gtest.h>

#include "builtin/gemm_reduce.h"

namespace ax::builtin {
namespace {

// A 3x3 convolution producing [2, cout, 6, 7] from 4 channels (groups as given).
GemmOp Conv(int64_t cout, int64_t groups = 1) {
  GemmOp op;
  op.conv.dims = 2;
  op.conv.batch = 2;
  op.conv.cin = 4;
  op.conv.cout = cout;
  op.conv.groups = groups;
  op.conv.in = {8, 9};
  op.conv.out = {6, 7};
  op.conv.kernel = {3, 3};
  op.conv.stride = op.conv.dilation = {1, 1};
  op.conv.padding = {0, 0};
  op.M = 2 * 6 * 7;
  op.N = cout / groups;
  op.K = 4 / groups * 9;
  op.out_shape = {2, cout, 6, 7};
  return op;
}

// A Linear producing [8, n].
GemmOp Linear(int64_t n) {
  GemmOp op;
  op.M = 8;
  op.N = n;
  op.K = 32;
  op.out_shape = {8, n};
  return op;
}

RedOp Red(const std::string& kind, const std::vector<int64_t>& in, std::vector<int> dims) {
  RedOp r;
  r.kind = kind;
  r.in_shape = in;
  r.out_shape = in;
  for (int d : dims) r.out_shape[static_cast<size_t>(d)] = 1;
  EXPECT_TRUE(MakeGeometry(in, dims, &r.geo));
  return r;
}

TEST(ColumnReduction, QualifiesOverTheColumnsOnly) {
  const GemmOp conv = Conv(24);
  for (const char* k : {"sum", "mean", "amax", "amin", "logsumexp", "softmax", "log_softmax"}) {
    EXPECT_TRUE(ReducesColumns(Red(k, conv.out_shape, {1}), conv)) << k;
  }
  EXPECT_FALSE(ReducesColumns(Red("argmax", conv.out_shape, {1}), conv)) << "an index, not a value";
  EXPECT_FALSE(ReducesColumns(Red("norm", conv.out_shape, {1}), conv));
  EXPECT_FALSE(ReducesColumns(Red("sum", conv.out_shape, {2}), conv)) << "a spatial dimension";
  EXPECT_FALSE(ReducesColumns(Red("sum", conv.out_shape, {1, 2, 3}), conv)) << "more than the channels";
  EXPECT_FALSE(ReducesColumns(Red("sum", conv.out_shape, {1}), Conv(24, 2))) << "groups span program axis 1";
  EXPECT_FALSE(ReducesColumns(Red("amax", {2, 300, 6, 7}, {1}), Conv(300))) << "wider than one tile";
  EXPECT_TRUE(ReducesColumns(Red("amax", {2, 256, 6, 7}, {1}), Conv(256)));
  const GemmOp lin = Linear(40);
  EXPECT_TRUE(ReducesColumns(Red("logsumexp", lin.out_shape, {1}), lin));
  EXPECT_FALSE(ReducesColumns(Red("sum", lin.out_shape, {0}), lin)) << "over the rows";
  EXPECT_FALSE(ReducesColumns(Red("sum", {8, 41}, {1}), lin)) << "another tensor's shape";
}

// A pooling of Conv(cout)'s [2, cout, 6, 7] output with window k and stride s per dimension.
RedOp Pool(const std::string& kind, std::vector<int64_t> k, std::vector<int64_t> s, int64_t cout = 24) {
  RedOp r;
  r.kind = kind;
  r.in_shape = {2, cout, 6, 7};
  r.out_shape = {2, cout, (6 - k[0]) / s[0] + 1, (7 - k[1]) / s[1] + 1};
  r.pool_k = k;
  r.pool_s = s;
  r.pool_p = {0, 0};
  r.pool_d = {1, 1};
  return r;
}

TEST(ColumnReduction, PoolingsInDisjointWindowsQualify) {
  const GemmOp conv = Conv(24);
  EXPECT_TRUE(PoolsWindows(Pool("maxpool", {2, 2}, {2, 2}), conv));
  EXPECT_TRUE(PoolsWindows(Pool("avgpool", {2, 4}, {2, 4}), conv)) << "windows of 8";
  EXPECT_TRUE(ReducesInTile(Pool("avgpool", {2, 2}, {2, 2}), conv));
  EXPECT_FALSE(ReducesColumns(Pool("avgpool", {2, 2}, {2, 2}), conv));
  EXPECT_TRUE(PoolsWindows(Pool("maxpool", {2, 2}, {2, 2}, 8), Conv(8, 4))) << "any groups: a pooling keeps channels";
  EXPECT_FALSE(PoolsWindows(Pool("maxpool", {3, 3}, {2, 2}), conv)) << "overlapping windows";
  EXPECT_FALSE(PoolsWindows(Pool("maxpool", {3, 3}, {3, 3}), conv)) << "9 positions: not a power of two";
  EXPECT_FALSE(PoolsWindows(Pool("maxpool", {1, 1}, {1, 1}), conv)) << "one position";
  RedOp padded = Pool("maxpool", {2, 2}, {2, 2});
  padded.pool_p = {1, 0};
  EXPECT_FALSE(PoolsWindows(padded, conv));
  RedOp dilated = Pool("maxpool", {2, 2}, {2, 2});
  dilated.pool_d = {1, 2};
  EXPECT_FALSE(PoolsWindows(dilated, conv));
  RedOp ceil = Pool("maxpool", {4, 4}, {4, 4});
  ceil.pool_ceil = true;
  EXPECT_FALSE(PoolsWindows(ceil, conv));
  EXPECT_FALSE(PoolsWindows(Pool("maxpool", {2, 2}, {2, 2}, 16), conv)) << "another tensor's shape";
  EXPECT_FALSE(PoolsWindows(Pool("maxpool", {2, 2}, {2, 2}), Linear(24)));
  // BM raised to hold a window; nothing else changes
  const GemmSchedule s = WithColumnTile(GemmSchedule{16, 32, 16, 8, 4, 2}, conv, Pool("avgpool", {4, 4}, {4, 4}));
  EXPECT_EQ(s, (GemmSchedule{16, 32, 16, 8, 4, 2})) << "16 positions fit BM 16";
  EXPECT_EQ(WithColumnTile(GemmSchedule{16, 32, 16, 8, 4, 2}, conv, Pool("avgpool", {4, 8}, {4, 8})).bm, 32);
}

TEST(ColumnReduction, OneTileHoldsTheColumns) {
  // BN widened to a power of two at least N; the accumulator kept at 128 x 128.
  GemmSchedule s = WithColumnTile(GemmSchedule{256, 64, 32, 8, 8, 3}, Conv(128), Red("sum", {2, 128, 6, 7}, {1}));
  EXPECT_EQ(s.bn, 128);
  EXPECT_EQ(s.bm, 128);
  EXPECT_EQ(s.warps, 8);
  EXPECT_TRUE(s.Valid());
  // narrowed where the tile was wider than needed, BM kept
  s = WithColumnTile(GemmSchedule{64, 128, 32, 8, 8, 3}, Conv(24), Red("sum", {2, 24, 6, 7}, {1}));
  EXPECT_EQ(s.bn, 32);
  EXPECT_EQ(s.bm, 64);
  EXPECT_EQ(s.warps, 4);
  // BK, then stages, shrink until the pipelined tiles fit shared memory
  s = WithColumnTile(GemmSchedule{64, 64, 128, 8, 4, 4}, Linear(256), Red("sum", {8, 256}, {1}));
  EXPECT_EQ(s.bn, 256);
  EXPECT_TRUE(s.Valid()) << s.bm << " " << s.bn << " " << s.bk << " " << s.stages;
  EXPECT_LE(s.SharedBytes(), 200 * 1024);
  // at least 16 columns
  EXPECT_EQ(WithColumnTile(GemmSchedule{}, Conv(5), Red("amax", {2, 5, 6, 7}, {1})).bn, 16);
  // an unchanged BN keeps the schedule
  EXPECT_EQ(WithColumnTile(GemmSchedule{128, 64, 32, 8, 4, 3}, Linear(64), Red("sum", {8, 64}, {1})), (GemmSchedule{128, 64, 32, 8, 4, 3}));
}

std::string Lines(const RedOp& op) {
  ColumnStore cs;
  cs.tail.op = &op;
  cs.rows = "rm";
  cs.rmask = "rm < M";
  cs.cols = "(rn < N)[None, :]";
  PyWriter w;
  Graph g;
  EXPECT_TRUE(EmitColumnReduction(g, cs, "acc", &w).ok());
  return w.str();
}

TEST(ColumnReduction, EmitsEachKind) {
  const GemmOp lin = Linear(40);
  std::string s = Lines(Red("sum", lin.out_shape, {1}));
  EXPECT_NE(s.find("cv = tl.where((rn < N)[None, :], acc, 0.0)"), std::string::npos) << s;
  EXPECT_NE(s.find("cr = tl.sum(cv, axis=1)"), std::string::npos) << s;
  EXPECT_NE(s.find("offs = rm"), std::string::npos) << "one value per row\n" << s;
  EXPECT_NE(s.find("tl.store(out0 + offs, cr, mask=mask)"), std::string::npos) << s;
  s = Lines(Red("mean", lin.out_shape, {1}));
  EXPECT_NE(s.find("cr = tl.sum(cv, axis=1) / 40.0"), std::string::npos) << s;
  s = Lines(Red("amin", lin.out_shape, {1}));
  EXPECT_NE(s.find("float('inf')"), std::string::npos) << s;
  EXPECT_NE(s.find("cr = _ax_nanmin(cv, 1)"), std::string::npos) << "NaN wins\n" << s;
  s = Lines(Red("logsumexp", lin.out_shape, {1}));
  EXPECT_NE(s.find("csafe = tl.where(tl.abs(cmx) == float('inf'), 0.0, cmx)"), std::string::npos) << s;
  s = Lines(Red("softmax", lin.out_shape, {1}));
  EXPECT_NE(s.find("cr = ce / ctot"), std::string::npos) << s;
  EXPECT_EQ(s.find("offs = rm"), std::string::npos) << "a softmax stores its tile\n" << s;
  EXPECT_NE(s.find("one store of the result"), std::string::npos) << s;
}

TEST(ColumnReduction, EmitsPoolingsOverWindowsOfRows) {
  const RedOp mx = Pool("maxpool", {2, 2}, {2, 2});
  ColumnStore cs;
  cs.tail.op = &mx;
  cs.rows = "poffs";
  cs.rmask = "pmask";
  cs.window = 4;
  PyWriter w;
  Graph g;
  ASSERT_TRUE(EmitColumnReduction(g, cs, "acc", &w).ok());
  std::string s = w.str();
  EXPECT_NE(s.find("pv = tl.reshape(acc, (BM // 4, 4, BN))"), std::string::npos) << s;
  EXPECT_NE(s.find("cr = _ax_nanmax(pv, 1)"), std::string::npos) << "NaN wins\n" << s;
  EXPECT_NE(s.find("offs = poffs"), std::string::npos) << s;
  EXPECT_NE(s.find("tl.store(out0 + offs, cr, mask=mask)"), std::string::npos) << s;
  const RedOp avg = Pool("avgpool", {2, 4}, {2, 4});
  cs.tail.op = &avg;
  cs.window = 8;
  PyWriter w2;
  ASSERT_TRUE(EmitColumnReduction(g, cs, "v3", &w2).ok());
  s = w2.str();
  EXPECT_NE(s.find("cr = tl.sum(pv, axis=1) / 8.0"), std::string::npos) << s;
  cs.window = 4;  // rows that do not go window by window
  PyWriter w3;
  EXPECT_FALSE(EmitColumnReduction(g, cs, "v3", &w3).ok());
}

}  // namespace
}  // namespace ax::builtin
