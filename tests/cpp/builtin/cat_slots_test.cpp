// Concatenations written in place on their own: which torch.cat and
// torch.stack calls qualify, which pieces the schedule's kernels store into
// their slices, the store index of a slice, and the forward that allocates
// the result and copies the other pieces.
#include <gtest/gtest.h>

#include "builtin/cat_slots.h"
#include "builtin/codegen.h"
#include "builtin/schedule.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;
using test_graphs::N;
using test_graphs::T;

json Placeholder(const std::string& name, std::vector<int64_t> shape) {
  return {{"name", name}, {"op", "placeholder"}, {"target", name}, {"args", json::array()}, {"out", T(shape)}};
}
json Fn(const std::string& name, const std::string& target, const std::string& callable, json args,
        std::vector<int64_t> shape, json kwargs = json::object(), const std::string& dtype = "torch.float32") {
  return {{"name", name}, {"op", "call_function"}, {"target", target}, {"callable", callable},
          {"args", args},  {"kwargs", kwargs},    {"out", T(shape, dtype)}};
}
json Int(int64_t v) { return {{"repr", std::to_string(v)}, {"value", v}}; }
json List(std::vector<std::string> names) {
  json l = json::array();
  for (const auto& n : names) l.push_back(N(n));
  return {{"list", l}};
}
json Output(json value) {
  return {{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {value}}, {"out", {{"kind", "other"}}}};
}

// relu(x) [2, 3, 4], the input y [2, 5, 4] and sigmoid(y) (also returned)
// concatenated over dimension 1: [2, 13, 4].
json CatGraph() {
  json nodes = json::array();
  nodes.push_back(Placeholder("x", {2, 3, 4}));
  nodes.push_back(Placeholder("y", {2, 5, 4}));
  nodes.push_back(Fn("relu", "relu", "torch.relu", {N("x")}, {2, 3, 4}));
  nodes.push_back(Fn("sigmoid", "sigmoid", "torch.sigmoid", {N("y")}, {2, 5, 4}));
  nodes.push_back(Fn("cat", "cat", "torch.cat", {List({"relu", "y", "sigmoid"}), Int(1)}, {2, 13, 4}));
  nodes.push_back(Output({{"tuple", {N("cat"), N("sigmoid")}}}));
  return {{"nodes", nodes}, {"training", true}};
}

TEST(CatSlots, ParsesCatsAndStacks) {
  Graph g;
  ASSERT_TRUE(ParseGraph(CatGraph(), &g).ok());
  CatOp c;
  ASSERT_TRUE(ParseCat(g, *g.Find("cat"), &c));
  EXPECT_FALSE(c.stack);
  EXPECT_EQ(c.dim, 1);
  ASSERT_EQ(c.pieces.size(), 3u);
  EXPECT_EQ(c.pieces[1].offset, 3);
  EXPECT_EQ(c.pieces[2].offset, 8);
  EXPECT_EQ(c.pieces[2].size, 5);
  EXPECT_EQ(c.Slice("v", 1), "v.narrow(1, 3, 5)");
  EXPECT_FALSE(ParseCat(g, *g.Find("relu"), &c));

  json stack = CatGraph();
  stack["nodes"][4] = Fn("cat", "stack", "torch.stack", {List({"relu", "x"})}, {2, 3, 2, 4}, {{"dim", Int(-2)}});
  ASSERT_TRUE(ParseGraph(stack, &g).ok());
  ASSERT_TRUE(ParseCat(g, *g.Find("cat"), &c));
  EXPECT_TRUE(c.stack);
  EXPECT_EQ(c.dim, 2);
  EXPECT_EQ(c.Slice("v", 1), "v.select(2, 1)");
}

TEST(CatSlots, RejectsWhatItCannotWriteInPlace) {
  Graph g;
  CatOp c;
  json bad = CatGraph();  // sizes that do not add up to the result's
  bad["nodes"][4]["out"] = T({2, 12, 4});
  ASSERT_TRUE(ParseGraph(bad, &g).ok());
  EXPECT_FALSE(ParseCat(g, *g.Find("cat"), &c));
  bad = CatGraph();  // an out= argument
  bad["nodes"][4]["kwargs"] = {{"out", N("x")}};
  ASSERT_TRUE(ParseGraph(bad, &g).ok());
  EXPECT_FALSE(ParseCat(g, *g.Find("cat"), &c));
  bad = CatGraph();  // a piece listed twice
  bad["nodes"][4]["args"][0] = List({"relu", "relu", "sigmoid"});
  bad["nodes"][4]["out"] = T({2, 11, 4});
  ASSERT_TRUE(ParseGraph(bad, &g).ok());
  EXPECT_FALSE(ParseCat(g, *g.Find("cat"), &c));
  bad = CatGraph();  // a result in another dtype
  bad["nodes"][4]["out"] = T({2, 13, 4}, "torch.float64");
  ASSERT_TRUE(ParseGraph(bad, &g).ok());
  EXPECT_FALSE(ParseCat(g, *g.Find("cat"), &c));
  bad = CatGraph();  // a dimension that is not a number
  bad["nodes"][4]["args"][1] = N("x");
  ASSERT_TRUE(ParseGraph(bad, &g).ok());
  EXPECT_FALSE(ParseCat(g, *g.Find("cat"), &c));
}

TEST(CatSlots, OnlyPiecesThatAKernelStoresAndTheCatAloneReads) {
  Graph g;
  ASSERT_TRUE(ParseGraph(CatGraph(), &g).ok());
  const FusedSchedule s = Schedule(g, Plan());
  ASSERT_EQ(s.cats.cats.size(), 1u);
  EXPECT_EQ(s.cats.cat_of_node.at(g.index.at("cat")), 0u);
  ASSERT_EQ(s.cats.slot_of.size(), 1u) << "y is an input; sigmoid is returned too";
  const auto& slot = s.cats.slot_of.at("relu");
  EXPECT_EQ(slot.piece, 0u);
  EXPECT_EQ(slot.remap, (StoreRemap{12, 52, false}));
  EXPECT_TRUE(s.cats.cats[0].pieces[0].in_place);
  EXPECT_FALSE(s.cats.cats[0].pieces[2].in_place);
  EXPECT_EQ(s.cats.RemapsOf({"sigmoid", "relu"}).count(1), 1u);
  EXPECT_TRUE(FormCatSlots(g, FlatStores(g, s), false).cats.empty()) << "no input to allocate beside";
  EXPECT_TRUE(FormCatSlots(g, {}, true).cats.empty()) << "no kernel stores a piece";

  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  const std::string fwd = src.substr(src.find("class ModelNew"));
  EXPECT_EQ(fwd.find("torch.cat("), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("v_cat = torch.empty([2, 13, 4], device=v_x.device, dtype=torch.float32)"), std::string::npos)
      << fwd;
  EXPECT_NE(fwd.find(", v_cat.narrow(1, 0, 3))"), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("v_cat.narrow(1, 3, 5).copy_(v_y)"), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("v_cat.narrow(1, 8, 5).copy_(v_sigmoid)"), std::string::npos) << fwd;
  EXPECT_LT(fwd.find("v_cat = torch.empty"), fwd.find("v_cat.narrow(1, 0, 3)")) << "allocated before its first writer";
  EXPECT_NE(src.find("tl.store(out0 + (offs // 12) * 52 + offs % 12, t_relu, mask=mask)"), std::string::npos) << src;
}

TEST(CatSlots, StoreIndices) {
  EXPECT_EQ(StoreIndex("offs", nullptr), "offs");
  const StoreRemap slice{12, 52, false}, contiguous{24, 24, false}, last{1, 3, false}, wide{8, 16, true};
  EXPECT_EQ(StoreIndex("offs", &slice), "(offs // 12) * 52 + offs % 12");
  EXPECT_EQ(StoreIndex("offs", &contiguous), "offs");
  EXPECT_EQ(StoreIndex("offs", &last), "offs * 3");
  EXPECT_EQ(StoreIndex("offs", &wide), "(offs.to(tl.int64) // 8) * 16 + offs.to(tl.int64) % 8");
}

TEST(CatSlots, SlicesOverTheFirstDimensionAreContiguous) {
  json j = CatGraph();
  j["nodes"][0] = Placeholder("x", {3, 5, 4});
  j["nodes"][2]["out"] = T({3, 5, 4});
  j["nodes"][4] = Fn("cat", "cat", "torch.cat", {List({"relu", "y"})}, {5, 5, 4});
  Graph g;
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  const FusedSchedule s = Schedule(g, Plan());
  ASSERT_EQ(s.cats.slot_of.count("relu"), 1u);
  EXPECT_EQ(s.cats.slot_of.at("relu").remap, (StoreRemap{60, 60, false}));
}

}  // namespace
}  // namespace ax::builtin
