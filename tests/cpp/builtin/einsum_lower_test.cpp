// The einsum lowering on its own: a two-operand torch.einsum in a trace
// becomes permutes, reshapes and a (batched) matrix product at load, and the
// forms it leaves alone.
#include <gtest/gtest.h>

#include "builtin/gemm.h"
#include "builtin/graph.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;
using test_graphs::N;
using test_graphs::T;

// torch.einsum(eq, x, y) of inputs of these shapes, returned.
Graph Einsum(const std::string& eq, std::vector<int64_t> xs, std::vector<int64_t> ys, std::vector<int64_t> out,
             const std::string& dtype = "torch.float32") {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T(xs, dtype)}});
  nodes.push_back({{"name", "y"}, {"op", "placeholder"}, {"target", "y"}, {"args", json::array()}, {"out", T(ys, dtype)}});
  nodes.push_back({{"name", "e"},
                   {"op", "call_function"},
                   {"target", "einsum"},
                   {"callable", "torch.functional.einsum"},
                   {"args", {{{"repr", "'" + eq + "'"}}, N("x"), N("y")}},
                   {"kwargs", json::object()},
                   {"out", T(out, dtype)}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("e")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  Status s = ParseGraph({{"nodes", nodes}, {"training", true}}, &g);
  EXPECT_TRUE(s.ok()) << s.message();
  return g;
}

// "op target shape" of every node between the inputs and the output.
std::vector<std::string> Steps(const Graph& g) {
  std::vector<std::string> out;
  for (const Node& n : g.nodes) {
    if (n.op == "placeholder" || n.op == "output") continue;
    std::string s = n.target + " [";
    for (size_t i = 0; i < n.shape.size(); ++i) s += (i ? "," : "") + std::to_string(n.shape[i]);
    out.push_back(s + "]");
  }
  return out;
}

using V = std::vector<std::string>;

TEST(EinsumLowering, MambasStateUpdateIsABatchedProduct) {
  // b h z c , b c h p n -> b z h p n: batch b h, free z and p n, summed c
  const Graph g = Einsum("bhzc,bchpn->bzhpn", {2, 3, 4, 4}, {2, 4, 3, 5, 6}, {2, 4, 3, 5, 6});
  EXPECT_EQ(Steps(g), (V{"reshape [6,4,4]", "permute [2,3,4,5,6]", "reshape [6,4,30]", "bmm [6,4,30]",
                         "reshape [2,3,4,5,6]", "permute [2,4,3,5,6]"}));
  const Node& last = *g.Find("e");
  EXPECT_EQ(last.target, "permute") << "the last node keeps the einsum's name";
  EXPECT_EQ(last.args.size(), 6u);
  EXPECT_EQ(last.args[2]["value"], 2);  // z sits at position 2 of (b, h, z, p, n)
  GemmOp op;
  const Node* bmm = nullptr;
  for (const Node& n : g.nodes) bmm = n.target == "bmm" ? &n : bmm;
  ASSERT_NE(bmm, nullptr);
  ASSERT_TRUE(ClassifyGemm(g, *bmm, &op)) << "a generated batched GEMM";
  EXPECT_EQ(op.Batch(), 6);
  EXPECT_EQ(op.K, 4);
}

TEST(EinsumLowering, WithoutBatchIndicesItIsOneMatrixProduct) {
  Graph g = Einsum("bijl,lk->bijk", {2, 3, 4, 5}, {5, 6}, {2, 3, 4, 6});
  EXPECT_EQ(Steps(g), (V{"reshape [24,5]", "matmul [24,6]", "reshape [2,3,4,6]"}));
  g = Einsum("ij,jk->ik", {10, 12}, {12, 7}, {10, 7});
  EXPECT_EQ(Steps(g), (V{"matmul [10,7]"})) << "nothing to permute or reshape";
  g = Einsum("ij,jk->ki", {10, 12}, {12, 7}, {7, 10});
  EXPECT_EQ(Steps(g), (V{"matmul [10,7]", "permute [7,10]"}));
  g = Einsum("bnd,bmd->bnm", {3, 7, 8}, {3, 9, 8}, {3, 7, 9});
  EXPECT_EQ(Steps(g), (V{"permute [3,8,9]", "bmm [3,7,9]"}));
}

TEST(EinsumLowering, OtherFormsStayEinsums) {
  for (const auto& [eq, xs, ys, out] : std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>,
                                                              std::vector<int64_t>>>{
           {"i,j->ij", {4}, {5}, {4, 5}},                // an outer product
           {"ij,j->i", {4, 5}, {5}, {4}},                // a matrix-vector product
           {"ij,jk", {4, 5}, {5, 6}, {4, 6}},            // an implicit output
           {"...j,jk->...k", {4, 5}, {5, 6}, {4, 6}},    // an ellipsis
           {"ii,ij->ij", {4, 4}, {4, 5}, {4, 5}},        // an index twice in one operand
           {"ij,kl->ik", {4, 5}, {6, 7}, {4, 6}},        // indices summed over one operand alone
           {"bij,bjk->bik", {2, 4, 5}, {1, 5, 6}, {2, 4, 6}}}) {  // a broadcast batch
    const Graph g = Einsum(eq, xs, ys, out);
    EXPECT_EQ(Steps(g), (V{"einsum [" + [&] {
                std::string s;
                for (size_t i = 0; i < out.size(); ++i) s += (i ? "," : "") + std::to_string(out[i]);
                return s;
              }() + "]"}))
        << eq;
  }
  const Graph g = Einsum("ij,jk->ik", {4, 5}, {5, 6}, {4, 6}, "torch.float64");
  EXPECT_EQ(Steps(g), (V{"einsum [4,6]"})) << "float32 only";
}

}  // namespace
}  // namespace ax::builtin
