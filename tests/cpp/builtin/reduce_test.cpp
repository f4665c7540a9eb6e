// Reductions on their own: the schedule a geometry resolves to (reduce_schedule.cpp)
// and the emitted kernels of each family (reduce_emit*.cpp) against golden
// texts: a softmax with its row in one tile, a sum over a middle dimension split
// over programs, a layer norm over long rows as a split-row kernel holding its
// chunk a round, the same norm re-reading its chunk, and a padded max pool.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "builtin/reduce.h"
#include "golden.h"

namespace ax::builtin {
namespace {

RedOp Rows(const std::string& kind, std::vector<int64_t> shape, std::vector<int> dims, std::vector<int64_t> out) {
  RedOp op;
  op.kind = kind;
  op.in_shape = shape;
  op.out_shape = out;
  EXPECT_TRUE(MakeGeometry(shape, dims, &op.geo));
  return op;
}

// A LayerNorm over the last dimension of [rows, R] with a weight and bias.
RedOp LayerNorm(int64_t rows, int64_t R) {
  RedOp op = Rows("norm", {rows, R}, {1}, {rows, R});
  op.module = "norm";
  op.norm_class = "LayerNorm";
  op.affine = true;
  op.ch_div = 1;
  op.ch_mod = R;
  op.row_div = R;
  op.row_mod = rows;
  return op;
}

std::string Emit(const RedOp& op, const RedSchedule& want = RedSchedule()) {
  std::string src;
  Status st = EmitReduction(op, 0, want, &src);
  EXPECT_TRUE(st.ok()) << st.message();
  return src;
}

TEST(Reduce, ShortRowsTakeOneTileLongRowsOfALargeTensorOneSplitRowKernel) {
  RedSchedule s = ResolveSchedule(Rows("softmax", {32, 1000}, {1}, {32, 1000}), RedSchedule());
  EXPECT_EQ(s.block_r, 1024);  // the whole row: one pass
  EXPECT_EQ(s.coop, 0);
  // 64 rows of 128K: a split-row kernel, chunks held a round (lag 2)
  s = ResolveSchedule(LayerNorm(64, 131072), RedSchedule());
  EXPECT_GT(s.coop, 0);
  EXPECT_EQ(s.lag, 2);
  EXPECT_EQ(s.block_r, 4096);
  // asked off, it stays off; asked to re-read, it re-reads
  EXPECT_EQ(ResolveSchedule(LayerNorm(64, 131072), RedSchedule{0, 0, 0, 0, -1, 0}).coop, -1);
  EXPECT_EQ(ResolveSchedule(LayerNorm(64, 131072), RedSchedule{0, 0, 0, 0, 4, 1}).lag, 1);
  // few rows: each split over programs
  s = ResolveSchedule(Rows("sum", {4, 1 << 20}, {1}, {4}), RedSchedule());
  EXPECT_GT(s.split, 1);
  // an arg reduction is never split (indices are not merged across programs)
  EXPECT_EQ(ResolveSchedule(Rows("argmax", {4, 1 << 20}, {1}, {4}), RedSchedule()).split, 1);
}

TEST(Reduce, EmitsTheGoldenKernels) {
  test_golden::ExpectGolden("reduce_softmax_one_tile.txt", Emit(Rows("softmax", {32, 1000}, {1}, {32, 1000})));
  test_golden::ExpectGolden("reduce_sum_middle_split.txt", Emit(Rows("sum", {8, 4096, 33}, {1}, {8, 33})));
  test_golden::ExpectGolden("reduce_layer_norm_held_a_round.txt", Emit(LayerNorm(64, 131072)));
  test_golden::ExpectGolden("reduce_layer_norm_reread.txt", Emit(LayerNorm(64, 131072), RedSchedule{0, 0, 0, 0, 4, 1}));
  RedOp pool;
  pool.kind = "maxpool";
  pool.in_shape = {2, 3, 9, 9};
  pool.out_shape = {2, 3, 5, 5};
  pool.pool_k = {3, 3};
  pool.pool_s = {2, 2};
  pool.pool_p = {1, 1};
  pool.pool_d = {1, 1};
  pool.geo.rows = 2 * 3 * 5 * 5;
  pool.geo.R = 9;
  test_golden::ExpectGolden("reduce_maxpool2d_padded.txt", Emit(pool));
}

TEST(Reduce, AnEpilogueNeedsASumMeanMaxOrMin) {
  RedOp op = Rows("softmax", {32, 1000}, {1}, {32, 1000});
  ReductionEpilogue epi;
  std::string src;
  Status st = EmitReduction(op, 0, RedSchedule(), &src, nullptr, &epi);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(src.empty());
}

}  // namespace
}  // namespace ax::builtin
