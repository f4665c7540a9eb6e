// Matrix products on their own: which nodes are generated GEMMs (Linear,
// a product with a 2-d matrix, batched products) and a batched product's
// first tile configuration.
#include <gtest/gtest.h>

#include "builtin/gemm.h"
#include "builtin/schedule.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;
using test_graphs::N;
using test_graphs::T;

// x @ y through `callable` (a call_function), x and y of these shapes.
Graph Product(const std::string& callable, std::vector<int64_t> xs, std::vector<int64_t> ys,
              std::vector<int64_t> out) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T(xs)}});
  nodes.push_back({{"name", "y"}, {"op", "placeholder"}, {"target", "y"}, {"args", json::array()}, {"out", T(ys)}});
  nodes.push_back({{"name", "p"},
                   {"op", "call_function"},
                   {"target", "matmul"},
                   {"callable", callable},
                   {"args", {N("x"), N("y")}},
                   {"out", T(out)}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("p")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  EXPECT_TRUE(ParseGraph({{"nodes", nodes}, {"training", true}}, &g).ok());
  return g;
}

TEST(Gemm, BatchedProductsAreOneProductPerBatch) {
  GemmOp op;
  Graph g = Product("torch.bmm", {4, 33, 20}, {4, 20, 17}, {4, 33, 17});
  ASSERT_TRUE(ClassifyGemm(g, *g.Find("p"), &op));
  EXPECT_TRUE(op.Batched());
  EXPECT_EQ(op.batch, (std::vector<int64_t>{4}));
  EXPECT_EQ(op.M, 33);
  EXPECT_EQ(op.K, 20);
  EXPECT_EQ(op.N, 17);
  EXPECT_EQ(op.other, "y");
  EXPECT_FALSE(op.linear);

  g = Product("operator.matmul", {2, 3, 16, 8}, {2, 3, 8, 5}, {2, 3, 16, 5});
  ASSERT_TRUE(ClassifyGemm(g, *g.Find("p"), &op));
  EXPECT_EQ(op.Batch(), 6);
  EXPECT_EQ(op.out_shape, (std::vector<int64_t>{2, 3, 16, 5}));

  g = Product("torch.matmul", {4, 33, 20}, {20, 17}, {4, 33, 17});  // a 2-d weight: one product over 132 rows
  ASSERT_TRUE(ClassifyGemm(g, *g.Find("p"), &op));
  EXPECT_FALSE(op.Batched());
  EXPECT_EQ(op.M, 132);
}

TEST(Gemm, BatchedProductsThatStayLibraryCalls) {
  GemmOp op;
  Graph g = Product("torch.matmul", {4, 33, 20}, {1, 20, 17}, {4, 33, 17});  // a broadcast batch
  EXPECT_FALSE(ClassifyGemm(g, *g.Find("p"), &op));
  g = Product("torch.bmm", {2, 3, 16, 8}, {2, 3, 8, 5}, {2, 3, 16, 5});  // bmm takes 3-d operands
  EXPECT_FALSE(ClassifyGemm(g, *g.Find("p"), &op));
  g = Product("torch.matmul", {3, 16, 8}, {2, 3, 8, 5}, {2, 3, 16, 5});  // ranks differ
  EXPECT_FALSE(ClassifyGemm(g, *g.Find("p"), &op));
  g = Product("torch.matmul", {4, 33, 20}, {4, 21, 17}, {4, 33, 17});  // K differs
  EXPECT_FALSE(ClassifyGemm(g, *g.Find("p"), &op));
  g = Product("torch.bmm", {70000, 2, 2}, {70000, 2, 2}, {70000, 2, 2});  // more batches than program axis 1
  EXPECT_FALSE(ClassifyGemm(g, *g.Find("p"), &op));
}

TEST(Gemm, BatchedProductsStartFromTilesTheirMatricesFill) {
  GemmOp op;
  Graph g = Product("torch.bmm", {2048, 32, 100}, {2048, 100, 512}, {2048, 32, 512});  // NetVLAD's
  ASSERT_TRUE(ClassifyGemm(g, *g.Find("p"), &op));
  const GemmSchedule s = DefaultBatchedSchedule(op);
  EXPECT_EQ(s.bm, 32);
  EXPECT_EQ(s.bn, 128);
  EXPECT_EQ(s.bk, 64);
  EXPECT_EQ(s.warps, 4);
  EXPECT_TRUE(s.ValidForDot());
  Plan plan;
  plan.gemm = true;
  EXPECT_EQ(Schedule(g, plan).resolved.gsched.at(0), s) << "the plan's default for it";
  g = Product("torch.bmm", {4, 3, 5}, {4, 5, 2}, {4, 3, 2});
  ASSERT_TRUE(ClassifyGemm(g, *g.Find("p"), &op));
  EXPECT_EQ(DefaultBatchedSchedule(op), (GemmSchedule{16, 16, 16, 8, 4, 3}));
}

}  // namespace
}  // namespace ax::builtin
