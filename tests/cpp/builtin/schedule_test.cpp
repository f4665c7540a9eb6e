// The scheduling stage on its own: hand-written traces in, the list of fused
// kernels (main operation, prologue and epilogue groups, resolved tile
// configurations) out, and the counts the proposer plans with.
#include <gtest/gtest.h>

#include <cmath>

#include "builtin/codegen.h"
#include "builtin/schedule.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;

using test_graphs::N;
using test_graphs::T;
json Num(double v) { return {{"repr", std::to_string(v)}, {"value", v}}; }
json Int(int64_t v) { return {{"repr", std::to_string(v)}, {"value", v}}; }

json Fn(const std::string& name, const std::string& target, const std::string& callable, json args,
        std::vector<int64_t> shape) {
  return {{"name", name}, {"op", "call_function"}, {"target", target}, {"callable", callable},
          {"args", args},  {"out", T(shape)}};
}

// x [R, C] -> * 2 -> sum over the last dimension (keepdim) -> x - s -> relu,
// and, when `sibling`, a max over the rows of x * 2 added to the result.
json RowSumGraph(int64_t R, int64_t C, bool sibling = false) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({R, C})}});
  nodes.push_back(Fn("mul", "mul", "operator.mul", {N("x"), Num(2.0)}, {R, C}));
  nodes.push_back({{"name", "s"},
                   {"op", "call_method"},
                   {"target", "sum"},
                   {"args", {N("mul"), Int(-1)}},
                   {"kwargs", {{"keepdim", {{"repr", "True"}, {"value", true}}}}},
                   {"out", T({R, 1})}});
  std::string last = "relu";
  if (sibling) {
    nodes.push_back({{"name", "m"},
                     {"op", "call_method"},
                     {"target", "amax"},
                     {"args", {N("x"), Int(-1)}},
                     {"kwargs", {{"keepdim", {{"repr", "True"}, {"value", true}}}}},
                     {"out", T({R, 1})}});
  }
  nodes.push_back(Fn("sub", "sub", "operator.sub", {N("x"), N("s")}, {R, C}));
  nodes.push_back(Fn("relu", "relu", "torch.relu", {N("sub")}, {R, C}));
  if (sibling) {
    nodes.push_back(Fn("add", "add", "operator.add", {N("relu"), N("m")}, {R, C}));
    last = "add";
  }
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N(last)}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

// x [6, 40] -> Linear(40, 24) -> relu -> * 2 -> Linear(24, 24).
json LinearGraph() {
  json lin = test_graphs::LinearModule(40, 24, true);
  json lin2 = test_graphs::LinearModule(24, 24, false);
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({6, 40})}});
  nodes.push_back({{"name", "fc"}, {"op", "call_module"}, {"target", "fc"}, {"module", lin}, {"args", {N("x")}},
                   {"out", T({6, 24})}});
  nodes.push_back(Fn("relu", "relu", "torch.relu", {N("fc")}, {6, 24}));
  nodes.push_back(Fn("mul", "mul", "operator.mul", {N("relu"), Num(2.0)}, {6, 24}));
  nodes.push_back({{"name", "fc2"}, {"op", "call_module"}, {"target", "fc2"}, {"module", lin2}, {"args", {N("mul")}},
                   {"out", T({6, 24})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("fc2")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

// "kind index [prologue groups] [epilogue groups]" for every kernel.
std::vector<std::string> Kernels(const FusedSchedule& s) {
  std::vector<std::string> out;
  for (const auto& k : s.kernels) {
    std::string e = std::string(KernelKindName(k.kind)) + " " + std::to_string(k.index);
    for (const auto* list : {&k.prologue, &k.epilogue}) {
      e += " [";
      for (size_t j = 0; j < list->size(); ++j) e += (j ? "," : "") + std::to_string((*list)[j]);
      e += "]";
    }
    out.push_back(e);
  }
  return out;
}

using V = std::vector<std::string>;

TEST(Schedule, ElementwiseGroupsAndAReductionAreThreeKernels) {
  Graph g;
  ASSERT_TRUE(ParseGraph(RowSumGraph(512, 1024), &g).ok());
  const FusedSchedule s = Schedule(g, Plan());
  ASSERT_EQ(s.groups.size(), 2u);  // * 2; x - s -> relu
  EXPECT_EQ(Kernels(s), (V{"pointwise 0 [] []", "pointwise 1 [] []", "reduction 0 [] []"}));
  EXPECT_EQ(s.TritonKernels(), 3);
  EXPECT_EQ(s.LaunchedGroups(), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(s.kernels[2].node, g.index.at("s"));
}

TEST(Schedule, APrologueAndAnEpilogueMoveIntoTheReductionsKernel) {
  Graph g;
  ASSERT_TRUE(ParseGraph(RowSumGraph(512, 1024), &g).ok());
  Plan p;
  p.reduce_prologue = true;
  EXPECT_EQ(Kernels(Schedule(g, p)), (V{"pointwise 1 [] []", "reduction 0 [0] []"}));
  p.red_epilogue = true;
  const FusedSchedule s = Schedule(g, p);
  EXPECT_EQ(Kernels(s), (V{"reduction 0 [0] [1]"}));
  EXPECT_EQ(s.inside, (std::set<size_t>{0, 1}));
  EXPECT_TRUE(s.LaunchedGroups().empty());
  // The counts the proposer plans with agree with the schedule.
  EXPECT_EQ(CountReducePrologues(g, Plan()), 1);
  EXPECT_EQ(CountRedEpilogues(g, Plan()), 1);
  EXPECT_EQ(CountNormEpilogues(g, Plan()), 0);
}

TEST(Schedule, KernelsThatAreNotLaunchedKeepTheDefaultTileConfiguration) {
  Graph g;
  ASSERT_TRUE(ParseGraph(RowSumGraph(512, 1024), &g).ok());
  Plan p;
  p.reduce_prologue = true;
  p.sched = {{256, 2}, {2048, 8}};
  const FusedSchedule s = Schedule(g, p);
  ASSERT_EQ(s.resolved.sched.size(), 2u);
  EXPECT_EQ(s.resolved.sched[0], KernelSchedule()) << "group 0 runs inside the reduction";
  EXPECT_EQ(s.resolved.sched[1], (KernelSchedule{2048, 8}));
  ASSERT_EQ(s.resolved.red.size(), 1u);
  // Codegen writes exactly the resolved plan into the source.
  std::string src;
  Plan written;
  int kernels = 0;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", p, &src, &kernels, &written).ok());
  EXPECT_EQ(written.ToJson(), s.resolved.ToJson());
  EXPECT_EQ(kernels, s.TritonKernels());
}

TEST(Schedule, SiblingReductionsShareTheFirstOnesKernel) {
  Graph g;
  ASSERT_TRUE(ParseGraph(RowSumGraph(512, 1024, true), &g).ok());
  Plan p;
  p.reduce_prologue = true;
  p.siblings = true;
  const FusedSchedule s = Schedule(g, p);
  ASSERT_EQ(s.reds.size(), 2u);
  EXPECT_EQ(Kernels(s), (V{"pointwise 1 [] []", "sibling reductions 0 [0] []"}));
  EXPECT_EQ(s.kernels.back().members, (std::vector<size_t>{1}));
  EXPECT_EQ(s.follower, (std::set<size_t>{1}));
  EXPECT_EQ(CountSiblingReductions(g, p), 1);
  EXPECT_EQ(s.TritonKernels(), 2);
}

TEST(Schedule, GemmsRunTheGroupThatReadsThemAsTheirEpilogue) {
  Graph g;
  ASSERT_TRUE(ParseGraph(LinearGraph(), &g).ok());
  EXPECT_EQ(Kernels(Schedule(g, Plan())), (V{"pointwise 0 [] []"}));
  Plan p;
  p.gemm = true;
  p.gsched = {GemmSchedule{32, 32, 32, 4, 4, 2}};
  const FusedSchedule s = Schedule(g, p);
  EXPECT_EQ(Kernels(s), (V{"GEMM 0 [] [0]", "GEMM 1 [] []"}));
  ASSERT_EQ(s.resolved.gsched.size(), 2u);
  EXPECT_EQ(s.resolved.gsched[0], (GemmSchedule{32, 32, 32, 4, 4, 2}));
  EXPECT_EQ(s.resolved.gsched[1], GemmSchedule()) << "a missing entry takes the default";
}

TEST(Schedule, ProfiledKernelNamesMapToScheduledKernels) {
  Graph g;
  ASSERT_TRUE(ParseGraph(RowSumGraph(512, 1024), &g).ok());
  Plan p;
  p.reduce_prologue = true;
  const FusedSchedule s = Schedule(g, p);  // pointwise 1, reduction 0 (with group 0 inside)
  EXPECT_EQ(KernelOfName(s, "_ax_kernel1"), (KernelRef{KernelKind::kPointwise, 1}));
  EXPECT_FALSE(KernelOfName(s, "_ax_kernel0")) << "group 0 is not launched on its own";
  EXPECT_FALSE(KernelOfName(s, "_ax_kernel10"));
  EXPECT_EQ(KernelOfName(s, "_ax_red0_kernel"), (KernelRef{KernelKind::kReduction, 0}));
  EXPECT_EQ(KernelOfName(s, "_ax_red0_merge"), (KernelRef{KernelKind::kReduction, 0}));
  EXPECT_FALSE(KernelOfName(s, "_ax_red"));
  EXPECT_FALSE(KernelOfName(s, "void cutlass::Kernel<...>"));
  // Launches of one kernel add up; library kernels do not count.
  EXPECT_EQ(SlowestKernel(s, {{"_ax_kernel1", 0.3}, {"_ax_red0_kernel", 0.2}, {"_ax_red0_merge", 0.2}, {"sgemm", 9.0}}),
            (KernelRef{KernelKind::kReduction, 0}));
  EXPECT_EQ(SlowestKernel(s, {{"_ax_kernel1", 0.5}, {"_ax_red0_kernel", 0.2}}), (KernelRef{KernelKind::kPointwise, 1}));
  EXPECT_FALSE(SlowestKernel(s, {{"sgemm", 9.0}}));
}

// q, k, v [2, 3, 16, 8] -> scaled_dot_product_attention (causal) -> * 2.
json AttentionGraph() {
  json nodes = json::array();
  for (const char* n : {"q", "k", "v"}) {
    nodes.push_back({{"name", n}, {"op", "placeholder"}, {"target", n}, {"args", json::array()}, {"out", T({2, 3, 16, 8})}});
  }
  json sdpa = Fn("sdpa", "scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention",
                 {N("q"), N("k"), N("v")}, {2, 3, 16, 8});
  sdpa["kwargs"] = {{"is_causal", {{"repr", "True"}, {"value", true}}}};
  nodes.push_back(sdpa);
  nodes.push_back(Fn("mul", "mul", "operator.mul", {N("sdpa"), Num(2.0)}, {2, 3, 16, 8}));
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("mul")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

TEST(Schedule, AttentionIsAKernelOfItsOwnUnderItsPlan) {
  Graph g;
  ASSERT_TRUE(ParseGraph(AttentionGraph(), &g).ok());
  EXPECT_EQ(Kernels(Schedule(g, Plan())), (V{"pointwise 0 [] []"}));
  Plan p;
  p.attention = true;
  const FusedSchedule s = Schedule(g, p);
  EXPECT_EQ(Kernels(s), (V{"pointwise 0 [] []", "attention 0 [] []"}));
  ASSERT_EQ(s.attns.size(), 1u);
  EXPECT_TRUE(s.attns[0].second.causal);
  EXPECT_DOUBLE_EQ(s.attns[0].second.scale, 1.0 / std::sqrt(8.0));
  EXPECT_EQ(s.resolved.asched.size(), 1u);
  EXPECT_EQ(KernelOfName(s, "_ax_attn_kernel0"), (KernelRef{KernelKind::kAttention, 0}));
  // A mask tensor or dropout is not generated.
  json j = AttentionGraph();
  j["nodes"][3]["kwargs"]["attn_mask"] = N("q");
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EXPECT_TRUE(Schedule(g, p).attns.empty());
  j = AttentionGraph();
  j["nodes"][3]["kwargs"]["dropout_p"] = Num(0.1);
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EXPECT_TRUE(Schedule(g, p).attns.empty());
  // The plan carries the tile; a bad one is refused.
  Plan back;
  ASSERT_TRUE(Plan::FromJson(s.resolved.ToJson(), &back).ok());
  EXPECT_EQ(back.asched, s.resolved.asched);
  json bad = s.resolved.ToJson();
  bad["attention"][0][0] = 24;
  EXPECT_FALSE(Plan::FromJson(bad, &back).ok());
}

TEST(Schedule, ARewrittenReductionIsATorchLaunchNotATritonKernel) {
  // sum over a Linear's output features under the algebra plan.
  json j = LinearGraph();
  j["nodes"].erase(4);  // fc2
  j["nodes"].erase(3);  // * 2
  j["nodes"].erase(2);  // relu
  j["nodes"].insert(j["nodes"].begin() + 2,
                    json{{"name", "s"},
                         {"op", "call_method"},
                         {"target", "sum"},
                         {"args", {N("fc"), Int(-1)}},
                         {"out", T({6})}});
  j["nodes"].back()["args"] = {N("s")};
  Graph g;
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EXPECT_EQ(CountLinearReductions(g), 1);
  Plan p;
  p.gemm = true;
  p.algebra = true;
  const FusedSchedule s = Schedule(g, p);
  EXPECT_TRUE(s.gemms.empty()) << "the Linear is no longer computed";
  EXPECT_EQ(Kernels(s), (V{"linear reduction 0 [] []"}));
  EXPECT_EQ(s.TritonKernels(), 0);
}

}  // namespace
}  // namespace ax::builtin
