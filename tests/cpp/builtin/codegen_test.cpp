// The builtin compiler without Python: graph parsing, grouping, codegen, plans
// and the proposer's no-repeat rule, on hand-written traces.
#include <gtest/gtest.h>

#include "builtin/builtin_proposer.h"
#include "builtin/codegen.h"
#include "builtin/fuse.h"
#include "builtin/graph.h"
#include "builtin/reduce.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;

using test_graphs::N;
using test_graphs::T;
json C(double v) { return {{"repr", std::to_string(v)}, {"value", v}}; }

// x + bias -> relu -> * 0.5, then a matmul (library), then sigmoid.
json BiasReluScaleGraph() {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "bias"}, {"op", "get_attr"}, {"target", "bias"}, {"args", json::array()}, {"out", T({8})}});
  nodes.push_back({{"name", "add"}, {"op", "call_function"}, {"target", "add"}, {"callable", "operator.add"},
                   {"args", {N("x"), N("bias")}}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "relu"}, {"op", "call_function"}, {"target", "relu"}, {"callable", "torch.relu"},
                   {"args", {N("add")}}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "mul"}, {"op", "call_function"}, {"target", "mul"}, {"callable", "operator.mul"},
                   {"args", {N("relu"), C(0.5)}}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "w"}, {"op", "get_attr"}, {"target", "layers.0.weight"}, {"args", json::array()},
                   {"out", T({8, 8})}});
  nodes.push_back({{"name", "matmul"}, {"op", "call_function"}, {"target", "matmul"}, {"callable", "torch.matmul"},
                   {"args", {N("mul"), N("w")}}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "sigmoid"}, {"op", "call_method"}, {"target", "sigmoid"}, {"args", {N("matmul")}},
                   {"out", T({4, 8})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("sigmoid")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

TEST(Graph, ParsesAndLinksUsers) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  ASSERT_EQ(g.nodes.size(), 9u);
  EXPECT_EQ(g.Find("add")->users, std::vector<int>{3});
  EXPECT_EQ(g.Find("x")->shape, (std::vector<int64_t>{4, 8}));
}

TEST(Graph, RejectsForwardReferences) {
  json j = BiasReluScaleGraph();
  j["nodes"][2]["args"][0] = N("relu");
  Graph g;
  EXPECT_FALSE(ParseGraph(j, &g).ok());
  EXPECT_FALSE(ParseGraph(json::object(), &g).ok());
}

TEST(Fuse, GroupsMaximalRunsAroundLibraryCalls) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  auto groups = FormGroups(g, FusionOptions());
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].nodes.size(), 3u);
  EXPECT_EQ(groups[0].inputs, (std::vector<std::string>{"x", "bias"}));
  EXPECT_EQ(groups[0].outputs, (std::vector<std::string>{"mul"}));
  EXPECT_EQ(groups[1].inputs, (std::vector<std::string>{"matmul"}));
  FusionOptions cut;
  cut.cuts = {"add"};
  EXPECT_EQ(FormGroups(g, cut).size(), 3u);
  FusionOptions single;
  single.singleton = true;
  EXPECT_EQ(FormGroups(g, single).size(), 4u);
}

TEST(Fuse, HalfPrecisionGroupsKeepTheirDtypeAndNeverMixDtypes) {
  // The same graph in bfloat16: one group of that dtype, its output allocated in it.
  json j = BiasReluScaleGraph();
  for (auto& n : j["nodes"]) {
    if (n["out"].value("kind", "") == "tensor") n["out"]["dtype"] = "torch.bfloat16";
  }
  Graph g;
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  auto groups = FormGroups(g, FusionOptions());
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].dtype, "torch.bfloat16");
  EXPECT_EQ(groups[0].nodes.size(), 3u);
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("dtype=torch.bfloat16)"), std::string::npos);
  EXPECT_EQ(src.find("dtype=torch.float32"), std::string::npos);
  EXPECT_NE(src.find(".to(tl.float32)"), std::string::npos);  // computed in float32
  // A float32 bias added to a bfloat16 x promotes: not fused (PyTorch's result is float32).
  j["nodes"][1]["out"]["dtype"] = "torch.float32";
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EwOp op;
  EXPECT_FALSE(ClassifyElementwise(g, *g.Find("add"), &op));
  EXPECT_TRUE(ClassifyElementwise(g, *g.Find("relu"), &op));
}

TEST(Fuse, LeavesUnsupportedOperatorsAlone) {
  Graph g;
  json j = BiasReluScaleGraph();
  j["nodes"][3]["kwargs"] = {{"inplace", {{"repr", "True"}}}};  // relu in place on add: add has one user: ok
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EwOp op;
  EXPECT_TRUE(ClassifyElementwise(g, g.nodes[3], &op));
  j["nodes"][2]["out"]["dtype"] = "torch.float16";
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EXPECT_FALSE(ClassifyElementwise(g, g.nodes[2], &op));  // not float32
  j = BiasReluScaleGraph();
  j["nodes"][4]["callable"] = "mymodule.mul";
  ASSERT_TRUE(ParseGraph(j, &g).ok());
  EXPECT_FALSE(ClassifyElementwise(g, g.nodes[4], &op));  // a user's own function
}

TEST(Codegen, EmitsKernelsLaunchersAndPlanMarker) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  Plan plan;
  plan.sched = {{256, 2}};
  std::string src;
  int kernels = 0;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plan, &src, &kernels).ok());
  EXPECT_EQ(kernels, 2);
  EXPECT_NE(src.find("class ModelNew(Model):"), std::string::npos);
  EXPECT_NE(src.find("def forward(self, v_x):"), std::string::npos);
  EXPECT_NE(src.find("@triton.jit\ndef _ax_kernel0("), std::string::npos);
  EXPECT_NE(src.find("v_mul = _ax_launch0(v_x, v_bias)"), std::string::npos);
  EXPECT_NE(src.find("v_matmul = torch.matmul(v_mul, v_w)"), std::string::npos);
  EXPECT_NE(src.find("getattr(self.layers, \"0\").weight"), std::string::npos);
  EXPECT_NE(src.find("return v_sigmoid"), std::string::npos);
  EXPECT_NE(src.find("BLOCK = 256"), std::string::npos);
  // The broadcast bias [8] over [4, 8] is indexed with constant arithmetic.
  EXPECT_NE(src.find("x1 = tl.load(in1 + ((offs % 8)), mask=mask"), std::string::npos) << src;
  EXPECT_NE(src.find("assert list(in1.shape) == [8]"), std::string::npos);
  Plan back;
  ASSERT_TRUE(ParsePlanMarker(src, &back).ok());
  ASSERT_EQ(back.sched.size(), 2u);
  EXPECT_EQ(back.sched[0], (KernelSchedule{256, 2}));
  EXPECT_EQ(back.sched[1], KernelSchedule());
}

// Buffers reused across the forward: every variable but the inputs is
// deleted right after the last statement that names it, and what the forward
// returns is not.
TEST(Codegen, VariablesAreDeletedAfterTheirLastUse) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  std::string src;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", Plan(), &src).ok());
  const size_t at = src.find("    def forward(self, v_x):\n");
  ASSERT_NE(at, std::string::npos) << src;
  EXPECT_EQ(src.substr(at),
            "    def forward(self, v_x):\n"
            "        v_bias = self.bias\n"
            "        v_mul = _ax_launch0(v_x, v_bias)\n"
            "        del v_bias\n"
            "        v_w = getattr(self.layers, \"0\").weight\n"
            "        v_matmul = torch.matmul(v_mul, v_w)\n"
            "        del v_mul, v_w\n"
            "        v_sigmoid = _ax_launch1(v_matmul)\n"
            "        del v_matmul\n"
            "        return v_sigmoid\n");
}

// A per-channel bias [C, 1, 1] over [N, C, H, W], and a [1, W] row over it.
TEST(Codegen, BroadcastIndexMergesDimensions) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({2, 3, 4, 5})}});
  nodes.push_back({{"name", "b"}, {"op", "get_attr"}, {"target", "b"}, {"args", json::array()}, {"out", T({3, 1, 1})}});
  nodes.push_back({{"name", "r"}, {"op", "get_attr"}, {"target", "r"}, {"args", json::array()}, {"out", T({1, 5})}});
  nodes.push_back({{"name", "add"}, {"op", "call_function"}, {"target", "add"}, {"callable", "operator.add"},
                   {"args", {N("x"), N("b")}}, {"out", T({2, 3, 4, 5})}});
  nodes.push_back({{"name", "mul"}, {"op", "call_function"}, {"target", "mul"}, {"callable", "operator.mul"},
                   {"args", {N("add"), N("r")}}, {"out", T({2, 3, 4, 5})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("mul")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &g).ok());
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("tl.load(in1 + (((offs // 20) % 3)), mask=mask"), std::string::npos) << src;
  EXPECT_NE(src.find("tl.load(in2 + ((offs % 5)), mask=mask"), std::string::npos) << src;
}

// torch.max(x, dim=1)[0] becomes one amax kernel; the max call itself is not emitted.
TEST(Codegen, MaxWithIndicesValuesBecomeAReduction) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({2, 3, 4})}});
  nodes.push_back({{"name", "max_1"}, {"op", "call_function"}, {"target", "max"}, {"callable", "torch.max"},
                   {"args", {N("x")}}, {"kwargs", {{"dim", {{"repr", "1"}, {"value", 1}}}}},
                   {"out", {{"kind", "tuple"}}}});
  nodes.push_back({{"name", "getitem"}, {"op", "call_function"}, {"target", "getitem"}, {"callable", "operator.getitem"},
                   {"args", {N("max_1"), {{"repr", "0"}, {"value", 0}}}}, {"out", T({2, 4})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("getitem")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &g).ok());
  RedOp op;
  ASSERT_TRUE(ClassifyReduction(g, g.nodes[2], &op));
  EXPECT_EQ(op.kind, "amax");
  EXPECT_EQ(op.geo.rows, 8);
  EXPECT_EQ(op.geo.R, 3);
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("v_getitem = _ax_red0(v_x)"), std::string::npos) << src;
  EXPECT_EQ(src.find("torch.max("), std::string::npos) << src;
}

// torch.argmax(x, dim=1) becomes one kernel with int64 indices; argmin with
// keepdim too; an argmax whose output is not int64 is not an argmax.
TEST(Codegen, ArgmaxAndArgminBecomeIndexReductions) {
  json I64 = {{"kind", "tensor"}, {"shape", {2, 4}}, {"dtype", "torch.int64"}};
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({2, 3, 4})}});
  nodes.push_back({{"name", "argmax"}, {"op", "call_function"}, {"target", "argmax"}, {"callable", "torch.argmax"},
                   {"args", {N("x")}}, {"kwargs", {{"dim", {{"repr", "1"}, {"value", 1}}}}}, {"out", I64}});
  json keep = I64;
  keep["shape"] = {2, 3, 1};
  nodes.push_back({{"name", "argmin"}, {"op", "call_method"}, {"target", "argmin"},
                   {"args", {N("x"), {{"repr", "-1"}, {"value", -1}}}},
                   {"kwargs", {{"keepdim", {{"repr", "True"}, {"value", true}}}}}, {"out", keep}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("argmax"), N("argmin")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &g).ok());
  RedOp op;
  ASSERT_TRUE(ClassifyReduction(g, g.nodes[1], &op));
  EXPECT_EQ(op.kind, "argmax");
  EXPECT_EQ(op.geo.rows, 8);
  EXPECT_EQ(op.geo.R, 3);
  ASSERT_TRUE(ClassifyReduction(g, g.nodes[2], &op));
  EXPECT_EQ(op.kind, "argmin");
  EXPECT_EQ(op.geo.rows, 6);
  EXPECT_EQ(op.geo.R, 4);
  EXPECT_EQ(ResolveSchedule(op, RedSchedule()).split, 1);  // indices are not merged across programs
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("v_argmax = _ax_red0(v_x)"), std::string::npos) << src;
  EXPECT_NE(src.find("dtype=torch.int64"), std::string::npos) << src;
  EXPECT_EQ(src.find("torch.argmax("), std::string::npos) << src;
  Graph bad = g;
  bad.nodes[1].dtype = "torch.float32";
  EXPECT_FALSE(ClassifyReduction(bad, bad.nodes[1], &op));
}

// A number passed to forward is a runtime argument of the kernel; a group
// that would read only numbers is not generated.
TEST(Codegen, NumbersPassedToForwardAreKernelArguments) {
  json nodes = json::array();
  nodes.push_back({{"name", "a"}, {"op", "placeholder"}, {"target", "A"}, {"args", json::array()}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "s"}, {"op", "placeholder"}, {"target", "s"}, {"args", json::array()},
                   {"out", {{"kind", "number"}, {"type", "float"}}}});
  nodes.push_back({{"name", "mul"}, {"op", "call_function"}, {"target", "mul"}, {"callable", "operator.mul"},
                   {"args", {N("a"), N("s")}}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("mul")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &g).ok());
  EXPECT_TRUE(g.nodes[1].is_number);
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("in1 = float(in1)"), std::string::npos) << src;
  EXPECT_NE(src.find("_ax_launch0(v_a, v_s)"), std::string::npos) << src;
  EXPECT_EQ(src.find("assert list(in1.shape)"), std::string::npos) << src;
  // unary operators never take a number as their tensor
  nodes[2] = {{"name", "mul"}, {"op", "call_function"}, {"target", "relu"}, {"callable", "torch.relu"},
              {"args", {N("s")}}, {"out", T({4, 8})}};
  Graph g2;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &g2).ok());
  EwOp op;
  EXPECT_FALSE(ClassifyElementwise(g2, g2.nodes[2], &op));
}

// F.smooth_l1_loss(p, t) (reduction mean) is lowered to the elementwise loss
// and torch.mean; its name stays on the mean, so its readers still find it.
TEST(Graph, ReducedPointwiseLossesAreLowered) {
  json S = {{"kind", "tensor"}, {"shape", json::array()}, {"dtype", "torch.float32"}};
  json nodes = json::array();
  nodes.push_back({{"name", "p"}, {"op", "placeholder"}, {"target", "p"}, {"args", json::array()}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "t"}, {"op", "placeholder"}, {"target", "t"}, {"args", json::array()}, {"out", T({4, 8})}});
  nodes.push_back({{"name", "loss"}, {"op", "call_function"}, {"target", "smooth_l1_loss"},
                   {"callable", "torch.nn.functional.smooth_l1_loss"}, {"args", {N("p"), N("t")}},
                   {"kwargs", {{"size_average", {{"repr", "None"}}}, {"reduce", {{"repr", "None"}}},
                               {"reduction", {{"repr", "'mean'"}}}, {"beta", C(1.0)}}},
                   {"out", S}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("loss")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &g).ok());
  ASSERT_EQ(g.nodes.size(), 5u);
  EXPECT_EQ(g.nodes[2].name, "loss_elementwise");
  EXPECT_EQ(g.nodes[2].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(g.nodes[3].name, "loss");
  EXPECT_EQ(g.nodes[3].callable, "torch.mean");
  EwOp op;
  ASSERT_TRUE(ClassifyElementwise(g, g.nodes[2], &op));
  EXPECT_EQ(op.fn, "smooth_l1_loss");
  EXPECT_EQ(op.params.at("beta"), 1.0);
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("v_loss = _ax_red0(v_loss_elementwise)"), std::string::npos) << src;
  EXPECT_EQ(src.find("smooth_l1_loss("), std::string::npos) << src;
  Plan lib;
  lib.library_reductions = true;
  ASSERT_TRUE(Generate(g, "", lib, &src).ok());
  EXPECT_NE(src.find("torch.mean(v_loss_elementwise)"), std::string::npos) << src;
  // the old size_average spelling stays a PyTorch call
  nodes[2]["kwargs"]["size_average"] = {{"repr", "False"}, {"value", false}};
  Graph old;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}}, &old).ok());
  EXPECT_EQ(old.nodes.size(), 4u);
}

TEST(Codegen, NothingToFuseIsAnError) {
  json j = BiasReluScaleGraph();
  json nodes = json::array();
  for (int i : {0, 5, 6}) nodes.push_back(j["nodes"][i]);
  nodes[2]["args"] = {N("x"), N("w")};
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("matmul")}}});
  Graph g;
  ASSERT_TRUE(ParseGraph({{"nodes", nodes}}, &g).ok());
  std::string src;
  Status s = Generate(g, "", Plan(), &src);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nothing to fuse"), std::string::npos);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << "a valid graph the compiler does not handle, not a failure";
}

TEST(Plan, MarkerErrors) {
  Plan p;
  EXPECT_FALSE(ParsePlanMarker("no marker", &p).ok());
  EXPECT_FALSE(ParsePlanMarker("# adaexplore-plan: {bad\n", &p).ok());
  EXPECT_FALSE(ParsePlanMarker("# adaexplore-plan: {\"v\":1,\"sched\":[[100,4]]}\n", &p).ok());
}

// x [6, 40] -> Linear(40, 24) -> relu -> * 2, and a second Linear read twice.
json LinearGraph() {
  json lin = test_graphs::LinearModule(40, 24, true);
  json lin2 = test_graphs::LinearModule(24, 24, false);
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({6, 40})}});
  nodes.push_back({{"name", "fc"}, {"op", "call_module"}, {"target", "fc"}, {"module", lin}, {"args", {N("x")}},
                   {"out", T({6, 24})}});
  nodes.push_back({{"name", "relu"}, {"op", "call_function"}, {"target", "relu"}, {"callable", "torch.relu"},
                   {"args", {N("fc")}}, {"out", T({6, 24})}});
  nodes.push_back({{"name", "mul"}, {"op", "call_function"}, {"target", "mul"}, {"callable", "operator.mul"},
                   {"args", {N("relu"), C(2.0)}}, {"out", T({6, 24})}});
  nodes.push_back({{"name", "fc2"}, {"op", "call_module"}, {"target", "fc2"}, {"module", lin2}, {"args", {N("mul")}},
                   {"out", T({6, 24})}});
  nodes.push_back({{"name", "matmul"}, {"op", "call_function"}, {"target", "matmul"}, {"callable", "torch.matmul"},
                   {"args", {N("fc2"), N("fc2")}}, {"out", T({6, 24})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("matmul")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

TEST(Codegen, MatmulOfTwoTensorsIsAGemmReadThroughStrides) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  Plan plan;
  plan.gemm = true;
  auto gemms = FormGemms(g, plan);
  ASSERT_EQ(gemms.size(), 1u);
  EXPECT_FALSE(gemms[0].second.linear);
  std::string src;
  int kernels = 0;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plan, &src, &kernels).ok());
  EXPECT_EQ(kernels, 2) << src;  // bias + relu * 0.5; the matmul with sigmoid as its epilogue
  EXPECT_NE(src.find("v_sigmoid = _ax_gemm0(v_mul, v_w)"), std::string::npos) << src;
  EXPECT_NE(src.find("SAM=a.stride(0), SAK=a.stride(1), SBK=b.stride(0), SBN=b.stride(1)"), std::string::npos);
  EXPECT_EQ(src.find("torch.matmul("), std::string::npos) << src;
}

TEST(Codegen, LinearBecomesATritonGemmWithItsEpilogue) {
  Graph g;
  ASSERT_TRUE(ParseGraph(LinearGraph(), &g).ok());
  Plan plan;
  plan.gemm = true;
  ASSERT_EQ(FormGemms(g, plan).size(), 2u);
  EXPECT_TRUE(FormGemms(g, Plan()).empty()) << "GEMMs only under a gemm plan";
  std::string src;
  int kernels = 0;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plan, &src, &kernels).ok());
  EXPECT_EQ(kernels, 2) << src;  // fc with relu and * 2 inside; fc2 alone
  EXPECT_NE(src.find("v_mul = _ax_gemm0(v_x, self.fc)"), std::string::npos) << src;
  EXPECT_NE(src.find("v_fc2 = _ax_gemm1(v_mul, self.fc2)"), std::string::npos) << src;
  EXPECT_EQ(src.find("_ax_launch0("), std::string::npos) << "the epilogue is not launched on its own";
  EXPECT_NE(src.find("input_precision=\"tf32x3\""), std::string::npos);
  EXPECT_NE(src.find("acc += tl.load(bias + rn % N)"), std::string::npos);
  EXPECT_NE(src.find("kmask"), std::string::npos) << "K = 40 is no multiple of the K tile";
  Plan back;
  ASSERT_TRUE(ParsePlanMarker(src, &back).ok());
  EXPECT_TRUE(back.gemm);
  ASSERT_EQ(back.gsched.size(), 2u);
  EXPECT_EQ(back.gsched[0], GemmSchedule());
  // A bad GEMM schedule in a marker is refused.
  json j = back.ToJson();
  j["gemm"][0][2] = 1024;
  Plan bad;
  EXPECT_FALSE(Plan::FromJson(j, &bad).ok());
}

TEST(Proposer, GemmPlansComeFirstAndSmallStepsTuneTheGemm) {
  Graph g;
  ASSERT_TRUE(ParseGraph(LinearGraph(), &g).ok());
  BuiltinProposer prop(g, "class Model: pass\n");
  std::vector<Plan> plans = prop.LargePlans();
  ASSERT_GE(plans.size(), 3u);
  EXPECT_TRUE(plans[0].gemm);
  search::StepContext ctx;
  ctx.large = true;
  auto first = prop.Propose(ctx);
  ASSERT_FALSE(first.source.empty());
  ctx.large = false;
  ctx.prompt.parent.source = first.source;
  ctx.prompt.parent.verdict = "correct, 1.5x faster than eager";
  ctx.parent_correct = true;
  ctx.parent_plan = first.plan;
  std::set<std::string> sources{first.source};
  Plan a;
  ASSERT_TRUE(ParsePlanMarker(first.source, &a).ok());
  for (int i = 0; i < 12; ++i) {
    auto p = prop.Propose(ctx);
    ASSERT_FALSE(p.source.empty()) << p.note;
    EXPECT_TRUE(sources.insert(p.source).second) << p.note;
    Plan b;
    ASSERT_TRUE(ParsePlanMarker(p.source, &b).ok());
    ASSERT_TRUE(b.gemm);
    int changed = 0;
    for (size_t k = 0; k < 2; ++k) changed += !(a.GemmFor(k) == b.GemmFor(k));
    EXPECT_EQ(changed, 1) << p.note;
    EXPECT_TRUE(b.GemmFor(0).Valid() && b.GemmFor(1).Valid()) << p.note;
  }
}

// A small step goes first to the kernel that took most of the parent's GPU
// time (its profile, by kernel name); library kernels do not count.
TEST(Proposer, SmallStepsTuneTheParentsSlowestKernelFirst) {
  Graph g;
  ASSERT_TRUE(ParseGraph(LinearGraph(), &g).ok());
  auto first_step = [&](std::vector<search::Outcome::KernelMs> times) {
    BuiltinProposer prop(g, "class Model: pass\n");
    search::StepContext ctx;
    ctx.large = true;
    auto first = prop.Propose(ctx);
    EXPECT_FALSE(first.source.empty());
    ctx.large = false;
    ctx.parent_correct = true;
    ctx.parent_plan = first.plan;
    ctx.parent_kernels = std::move(times);
    auto p = prop.Propose(ctx);
    Plan a, b;
    EXPECT_TRUE(Plan::FromJson(first.plan, &a).ok());
    EXPECT_TRUE(Plan::FromJson(p.plan, &b).ok()) << p.note;
    std::vector<int> changed;
    for (int k = 0; k < 2; ++k) {
      if (!(a.GemmFor(k) == b.GemmFor(k))) changed.push_back(k);
    }
    return std::make_pair(changed, p.note);
  };
  auto [unprofiled, note0] = first_step({});
  EXPECT_EQ(unprofiled, std::vector<int>{0}) << note0;
  auto [profiled, note1] = first_step({{"cudnn_big_kernel", 9.0}, {"_ax_gemm_kernel1", 0.5}, {"_ax_gemm_kernel0", 0.25}});
  EXPECT_EQ(profiled, std::vector<int>{1}) << note1;
  EXPECT_NE(note1.find("slowest kernel: GEMM 1"), std::string::npos) << note1;
}

// The plan travels as data: a proposal carries it, and a small step takes
// the parent's from the context, not from the source's marker comment.
TEST(Proposer, SmallStepsTakeTheParentsPlanAsData) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  BuiltinProposer prop(g, "class Model: pass\n");
  search::StepContext ctx;
  ctx.large = true;
  auto first = prop.Propose(ctx);
  ASSERT_FALSE(first.source.empty());
  Plan marked;
  ASSERT_TRUE(ParsePlanMarker(first.source, &marked).ok());
  EXPECT_EQ(first.plan, marked.ToJson());
  ctx.large = false;
  ctx.prompt.parent.source = "# a kernel without a plan marker\n";
  ctx.parent_plan = first.plan;
  ctx.parent_correct = true;
  auto small = prop.Propose(ctx);
  ASSERT_FALSE(small.source.empty()) << small.note;
  EXPECT_EQ(small.note.find("has no plan"), std::string::npos) << small.note;
  Plan a, b;
  ASSERT_TRUE(Plan::FromJson(first.plan, &a).ok());
  ASSERT_TRUE(Plan::FromJson(small.plan, &b).ok());
  int changed = 0;
  for (size_t k = 0; k < a.sched.size(); ++k) {
    changed += a.sched[k].block != b.sched[k].block;
    changed += a.sched[k].warps != b.sched[k].warps;
  }
  for (size_t k = 0; k < a.gsched.size(); ++k) changed += !(a.gsched[k] == b.gsched[k]);
  EXPECT_EQ(changed, 1) << small.note;
  // A failed parent, whatever its verdict's words: the next plan instead.
  ctx.parent_correct = false;
  ctx.prompt.parent.verdict = "correct-looking text";
  auto after_failure = prop.Propose(ctx);
  EXPECT_NE(after_failure.note.find("the parent failed"), std::string::npos) << after_failure.note;
}

TEST(Proposer, LargeStepsAreDistinctThenRunOut) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  BuiltinProposer prop(g, "class Model: pass\n");
  search::StepContext ctx;
  ctx.large = true;
  std::set<std::string> sources;
  int n = 0;
  for (;; ++n) {
    auto p = prop.Propose(ctx);
    if (p.source.empty()) {
      EXPECT_FALSE(p.note.empty());
      EXPECT_TRUE(p.stop.ok());
      break;
    }
    EXPECT_TRUE(sources.insert(p.source).second) << "repeated at " << n;
    ASSERT_LT(n, 50);
  }
  EXPECT_EQ(n, static_cast<int>(prop.LargePlans().size()));
}

TEST(Proposer, SmallStepsChangeOneKnobAndNeverRepeat) {
  Graph g;
  ASSERT_TRUE(ParseGraph(BiasReluScaleGraph(), &g).ok());
  BuiltinProposer prop(g, "class Model: pass\n");
  search::StepContext ctx;
  ctx.large = true;
  auto first = prop.Propose(ctx);
  ASSERT_FALSE(first.source.empty());
  ctx.large = false;
  ctx.prompt.parent.source = first.source;
  ctx.prompt.parent.verdict = "correct, 1.2x faster than eager";
  ctx.parent_correct = true;
  std::set<std::string> sources{first.source};
  for (int i = 0; i < 30; ++i) {
    auto p = prop.Propose(ctx);
    if (p.source.empty()) break;
    EXPECT_TRUE(sources.insert(p.source).second);
    if (i == 0) {
      Plan a, b;
      ASSERT_TRUE(ParsePlanMarker(first.source, &a).ok());
      ASSERT_TRUE(ParsePlanMarker(p.source, &b).ok());
      int changed = 0;
      for (size_t k = 0; k < a.sched.size(); ++k) {
        changed += a.sched[k].block != b.sched[k].block;
        changed += a.sched[k].warps != b.sched[k].warps;
      }
      for (size_t k = 0; k < a.gsched.size(); ++k) changed += !(a.gsched[k] == b.gsched[k]);
      EXPECT_EQ(changed, 1);
    }
  }
  EXPECT_GT(sources.size(), 10u);
}

TEST(Proposer, DeclinesUntraceableTasks) {
  auto prop = BuiltinProposer::Declining("cannot trace: dynamic control flow");
  search::StepContext ctx;
  auto p = prop->Propose(ctx);
  EXPECT_TRUE(p.source.empty());
  EXPECT_FALSE(p.stop.ok());
  EXPECT_EQ(p.note, "cannot trace: dynamic control flow");
}

TEST(Reduce, EpiloguesOnlyWhereTheRowIsReadFromCacheAgain) {
  auto fits = [](const std::vector<int64_t>& shape, std::vector<int> dims, int coop = 0) {
    RedOp op;
    op.kind = "sum";
    op.in_shape = shape;
    EXPECT_TRUE(MakeGeometry(shape, dims, &op.geo));
    RedSchedule want;
    want.coop = coop;
    return EpilogueFits(op, want);
  };
  EXPECT_TRUE(fits({512, 4096}, {1}));        // last-dim rows of one block
  // longer last-dim rows: the re-read was measured slower in one kernel, so
  // only as a split-row kernel (on by default for a large tensor, or asked)
  EXPECT_FALSE(fits({512, 65535}, {1}, -1));
  EXPECT_TRUE(fits({512, 65535}, {1}));
  EXPECT_FALSE(fits({16, 65535}, {1}));
  EXPECT_TRUE(fits({16, 65535}, {1}, 2));
  EXPECT_TRUE(fits({4, 300, 4096}, {1}));     // over a middle dimension: small tiles of many rows
  EXPECT_FALSE(fits({100, 64}, {1}));         // too few rows
  EXPECT_FALSE(fits({2, 1 << 18, 256}, {1}));  // middle-dimension rows far too long
}

}  // namespace
}  // namespace ax::builtin
