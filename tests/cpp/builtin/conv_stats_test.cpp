// Norm statistics in a convolution's kernel without Python
// (src/builtin/conv_stats.cpp): which norms' rows are whole channel blocks of
// the output, which means over the positions take them, the rows per image of a phased launch, the tile that keeps a
// tile within two images, the partials' slots, and the merge's lines.
#include <gtest/gtest.h>

#include "builtin/conv_stats.h"

namespace ax::builtin {
namespace {

// A 3x3 convolution producing [2, cout, oh, ow] from 4 channels.
GemmOp Conv(int64_t cout, int64_t oh = 10, int64_t ow = 11) {
  GemmOp op;
  op.conv.dims = 2;
  op.conv.batch = 2;
  op.conv.cin = 4;
  op.conv.cout = cout;
  op.conv.out = {oh, ow};
  op.conv.in = {oh + 2, ow + 2};
  op.conv.kernel = {3, 3};
  op.conv.stride = {1, 1};
  op.conv.padding = {0, 0};
  op.conv.dilation = {1, 1};
  op.M = 2 * oh * ow;
  op.N = cout;
  op.K = 4 * 9;
  op.out_shape = {2, cout, oh, ow};
  return op;
}

// A norm of class cls over x's shape, with reduce_lower.cpp's geometry.
RedOp Norm(const std::string& cls, const std::vector<int64_t>& x, int64_t groups = 0) {
  RedOp r;
  r.kind = "norm";
  r.norm_class = cls;
  r.in_shape = r.out_shape = x;
  const int64_t N = x[0], C = x[1], S = x[2] * x[3];
  if (cls == "BatchNorm2d") {
    r.geo = Geometry{C, N * S, C, 0, S, S, C * S};
  } else if (cls == "LayerNorm") {
    r.geo = Geometry{N, C * S, 1, C * S, 0, 1, 1};
  } else {
    const int64_t G = cls == "GroupNorm" ? groups : C;
    r.geo = Geometry{N * G, (C / G) * S, 1, (C / G) * S, 0, 1, 1};
  }
  return r;
}

TEST(ConvStats, NormRowsAreWholeChannelBlocks) {
  const GemmOp conv = Conv(16);
  NormRows rows;
  ASSERT_TRUE(NormRowsOf(Norm("GroupNorm", conv.out_shape, 4), conv, &rows));
  EXPECT_EQ(rows.groups, 4);
  ASSERT_TRUE(NormRowsOf(Norm("InstanceNorm2d", conv.out_shape), conv, &rows));
  EXPECT_EQ(rows.groups, 16);
  ASSERT_TRUE(NormRowsOf(Norm("LayerNorm", conv.out_shape), conv, &rows));
  EXPECT_EQ(rows.groups, 1);
  ASSERT_TRUE(NormRowsOf(Norm("BatchNorm2d", conv.out_shape), conv, &rows));
  EXPECT_TRUE(rows.per_channel());
  // a layer norm over the last dimension only: rows are not channel blocks
  RedOp last = Norm("LayerNorm", conv.out_shape);
  last.geo = Geometry{2 * 16 * 10, 11, 1, 11, 0, 1, 1};
  EXPECT_FALSE(NormRowsOf(last, conv, &rows));
  EXPECT_FALSE(NormRowsOf(Norm("GroupNorm", {2, 16, 10, 12}, 4), conv, &rows)) << "another tensor's shape";
  RedOp sum = Norm("GroupNorm", conv.out_shape, 4);
  sum.kind = "sum";
  EXPECT_FALSE(NormRowsOf(sum, conv, &rows)) << "not a norm";
  GemmOp linear = conv;
  linear.conv.dims = 0;
  EXPECT_FALSE(NormRowsOf(Norm("GroupNorm", conv.out_shape, 4), linear, &rows)) << "a matrix product";
}

// A mean of x over dims, with MakeGeometry's geometry.
RedOp Mean(const std::vector<int64_t>& x, const std::vector<int>& dims) {
  RedOp r;
  r.kind = "mean";
  r.in_shape = x;
  r.out_shape = x;
  for (int d : dims) r.out_shape[static_cast<size_t>(d)] = 1;
  EXPECT_TRUE(MakeGeometry(x, dims, &r.geo));
  return r;
}

TEST(ConvStats, SpatialMeansTakeInstanceNormRows) {
  const GemmOp conv = Conv(16);
  NormRows rows;
  EXPECT_TRUE(IsSpatialMean(Mean(conv.out_shape, {2, 3}), conv));
  ASSERT_TRUE(StatsRowsOf(Mean(conv.out_shape, {2, 3}), conv, &rows));
  EXPECT_EQ(rows.groups, 16) << "one row per image and channel";
  ASSERT_TRUE(StatsRowsOf(Norm("GroupNorm", conv.out_shape, 4), conv, &rows));
  EXPECT_EQ(rows.groups, 4) << "norms as NormRowsOf says";
  EXPECT_FALSE(IsSpatialMean(Mean(conv.out_shape, {3}), conv)) << "one spatial dimension";
  EXPECT_FALSE(IsSpatialMean(Mean(conv.out_shape, {1, 2, 3}), conv)) << "the channels too";
  EXPECT_FALSE(IsSpatialMean(Mean({2, 16, 10, 12}, {2, 3}), conv)) << "another tensor's shape";
  RedOp sum = Mean(conv.out_shape, {2, 3});
  sum.kind = "sum";
  EXPECT_FALSE(StatsRowsOf(sum, conv, &rows)) << "a sum is not computed from the partial means";
  std::string src;
  EXPECT_TRUE(EmitMeanFromStatistics(Mean(conv.out_shape, {2, 3}), 4, &src).ok());
  EXPECT_NE(src.find("def _ax_red4(x, st):"), std::string::npos) << src;
  EXPECT_NE(src.find("return st[0].view([2, 16, 1, 1])"), std::string::npos) << src;
  EXPECT_FALSE(EmitMeanFromStatistics(sum, 4, &src).ok());
}

TEST(ConvStats, PhasedLaunchesCountTheirOwnRows) {
  GemmOp t = Conv(6, 10, 12);
  t.conv.transposed = true;
  t.conv.stride = {2, 2};
  EXPECT_EQ(ConvRowsPerImage(t), 5 * 6) << "ceil(10 / 2) x ceil(12 / 2) per phase";
  EXPECT_EQ(ConvRowsPerImage(Conv(6, 10, 12)), 120);
  // slots: 4 phases x ceil(2 * 30 / 16) tiles x 2
  EXPECT_EQ(StatsSlots(t, GemmSchedule{16, 16, 16, 8, 4, 3}), 4 * 4 * 2);
}

TEST(ConvStats, TilesSpanTwoImagesAtMost) {
  // 110 rows per image: BM 256 and 128 halve to 64; a tile then holds rows
  // of two images at most
  GemmSchedule s = WithStatsTile(GemmSchedule{256, 64, 32, 8, 8, 3}, Conv(16));
  EXPECT_EQ(s.bm, 64);
  EXPECT_TRUE(s.Valid());
  EXPECT_EQ(WithStatsTile(GemmSchedule{64, 64, 32, 8, 4, 3}, Conv(16)).bm, 64) << "already small enough";
  EXPECT_EQ(WithStatsTile(GemmSchedule{128, 64, 32, 8, 4, 3}, Conv(16, 4, 5)).bm, 16) << "20 rows per image";
}

TEST(ConvStats, TheTileWritesTwoPartialsPerChannel) {
  PyWriter w;
  EmitTileStatistics(Conv(16), false, "acc", &w);
  const std::string& src = w.str();
  EXPECT_NE(src.find("nb0 = (pid_m * BM) // 110"), std::string::npos) << src;
  EXPECT_NE(src.find("slot = pid_m * 2"), std::string::npos) << src;
  EXPECT_NE(src.find("sr1 = srow & (nb != nb0)"), std::string::npos) << src;
  EXPECT_NE(src.find("tl.store(pm + (slot + 1) * 16 + co, k0 + sdm1, mask=cm)"), std::string::npos) << src;
  PyWriter p;
  EmitTileStatistics(Conv(16), true, "v7", &p);
  EXPECT_NE(p.str().find("srow = (rm < M) & orow"), std::string::npos) << p.str();
  EXPECT_NE(p.str().find("slot = (PHI * num_m + pid_m) * 2"), std::string::npos) << p.str();
  EXPECT_NE(p.str().find("dv = v7 - k0[None, :]"), std::string::npos) << p.str();
}

TEST(ConvStats, TheMergeVisitsARowsPartials) {
  const GemmOp conv = Conv(16);
  const GemmSchedule s{64, 16, 16, 8, 4, 3};
  RedOp gn = Norm("GroupNorm", conv.out_shape, 4);
  ConvStatsTail tail{&gn, NormRows{4}};
  std::string src;
  EmitStatsMerge(conv, s, tail, 3, &src);
  EXPECT_NE(src.find("def _ax_gemm3_stats_merge(pc, pm, pq, mean, var):"), std::string::npos) << src;
  EXPECT_NE(src.find("t_lo = (n * 110) // 64"), std::string::npos) << src;
  EXPECT_NE(src.find("for t0 in range(0, 3, 4):"), std::string::npos) << "110 rows span 3 tiles at most\n" << src;
  EXPECT_NE(src.find("mu = sh + "), std::string::npos) << src;
  RedOp bn = Norm("BatchNorm2d", conv.out_shape);
  ConvStatsTail per{&bn, NormRows{0}};
  std::string bsrc;
  EmitStatsMerge(conv, s, per, 0, &bsrc);
  EXPECT_NE(bsrc.find("at = slot * 16 + r"), std::string::npos) << bsrc;
  EXPECT_NE(bsrc.find("m = slot < 8"), std::string::npos) << "ceil(220 / 64) tiles x 2\n" << bsrc;
  PyWriter l;
  EmitStatsMergeCall(conv, s, tail, 3, &l);
  EXPECT_NE(l.str().find("_ax_gemm3_stats_merge[(8,)](pc, pm, pq, mean, var"), std::string::npos) << l.str();
}

}  // namespace
}  // namespace ax::builtin
