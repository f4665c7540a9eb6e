// Generated convolutions without Python (src/builtin/conv.cpp): which
// modules are classified, their GEMM view, where the plan puts them, and the
// emitted kernel against a golden text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "builtin/builtin_proposer.h"
#include "builtin/codegen.h"
#include "builtin/conv.h"
#include "builtin/graph.h"
#include "golden.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;

using test_graphs::N;
using test_graphs::T;

// x [2, cin, 9, 10] -> conv (module `attrs`) -> relu.
json ConvGraph(json attrs, std::vector<int64_t> weight, std::vector<int64_t> out, const std::string& cls = "Conv2d",
               const std::string& dtype = "torch.float32") {
  json params = {{"weight", {{"shape", weight}, {"dtype", dtype}}}};
  if (attrs.value("bias", false)) params["bias"] = {{"shape", {attrs["out_channels"]}}, {"dtype", dtype}};
  json mod = {{"class", cls}, {"attrs", attrs}, {"params", params}};
  json nodes = json::array();
  const int64_t cin = attrs["in_channels"].get<int64_t>();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()},
                   {"out", T({2, cin, 9, 10}, dtype)}});
  nodes.push_back({{"name", "conv"}, {"op", "call_module"}, {"target", "conv"}, {"module", mod}, {"args", {N("x")}},
                   {"out", T(out, dtype)}});
  nodes.push_back({{"name", "relu"}, {"op", "call_function"}, {"target", "relu"}, {"callable", "torch.relu"},
                   {"args", {N("conv")}}, {"out", T(out, dtype)}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("relu")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

json Attrs(int64_t cin, int64_t cout, json k, json stride, json pad, json dil, int64_t groups, bool bias) {
  return {{"in_channels", cin}, {"out_channels", cout}, {"kernel_size", k}, {"stride", stride},
          {"padding", pad},     {"dilation", dil},      {"groups", groups},  {"bias", bias},
          {"padding_mode", "zeros"}};
}

bool Classify(const json& graph, GemmOp* op) {
  Graph g;
  if (!ParseGraph(graph, &g).ok()) return false;
  return ClassifyConv(g, *g.Find("conv"), op);
}

TEST(Conv, ClassifiesAModuleAsAGemmPerGroup) {
  GemmOp op;
  // 16 -> 8 channels, 3x3, stride 2, padding 1: out 5 x 5.
  ASSERT_TRUE(Classify(ConvGraph(Attrs(16, 8, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true), {8, 16, 3, 3}, {2, 8, 5, 5}),
                       &op));
  EXPECT_TRUE(op.IsConv());
  EXPECT_EQ(op.M, 2 * 5 * 5);
  EXPECT_EQ(op.N, 8);
  EXPECT_EQ(op.K, 16 * 9);
  EXPECT_TRUE(op.has_bias);
  EXPECT_TRUE(ConvTapMajor(op));
  // Grouped and dilated, `same` padding: 2 groups of 4 -> 8 each, 9 x 10 kept.
  ASSERT_TRUE(Classify(ConvGraph(Attrs(8, 16, {3, 3}, {1, 1}, "same", {2, 2}, 2, false), {16, 4, 3, 3}, {2, 16, 9, 10}),
                       &op));
  EXPECT_EQ(op.conv.padding, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(op.N, 8);
  EXPECT_EQ(op.K, 4 * 9);
  EXPECT_FALSE(ConvTapMajor(op));
  // Transposed, stride 2, output padding 1: (9-1)*2 - 2 + 3 + 1 = 18, (10-1)*2 - 2 + 3 + 1 = 20.
  json t = Attrs(16, 32, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true);
  t["output_padding"] = {1, 1};
  ASSERT_TRUE(Classify(ConvGraph(t, {16, 32, 3, 3}, {2, 32, 18, 20}, "ConvTranspose2d"), &op));
  EXPECT_TRUE(op.conv.transposed);
  EXPECT_EQ(op.N, 32);
}

TEST(Conv, RefusesWhatItDoesNotGenerate) {
  GemmOp op;
  json a = Attrs(16, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false);
  const std::vector<int64_t> w = {8, 16, 3, 3}, out = {2, 8, 9, 10};
  ASSERT_TRUE(Classify(ConvGraph(a, w, out), &op));
  json reflect = a;
  reflect["padding_mode"] = "reflect";
  EXPECT_FALSE(Classify(ConvGraph(reflect, w, out), &op));
  json same_odd = Attrs(16, 8, {2, 2}, {1, 1}, "same", {1, 1}, 1, false);  // pads one side more
  EXPECT_FALSE(Classify(ConvGraph(same_odd, {8, 16, 2, 2}, out), &op));
  EXPECT_FALSE(Classify(ConvGraph(a, w, out, "Conv2d", "torch.bfloat16"), &op));
  EXPECT_FALSE(Classify(ConvGraph(a, w, {2, 8, 9, 11}), &op)) << "a traced shape the geometry does not give";
  EXPECT_FALSE(Classify(ConvGraph(a, {8, 16, 3, 2}, out), &op)) << "a weight of another shape";
}

TEST(Conv, ConvolutionPlansFollowTheDefault) {
  Graph g;
  ASSERT_TRUE(ParseGraph(ConvGraph(Attrs(16, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true), {32, 16, 3, 3},
                                   {2, 32, 9, 10}),
                         &g)
                  .ok());
  BuiltinProposer prop(g, "class Model: pass\n");
  const std::vector<Plan> plans = prop.LargePlans();
  ASSERT_GE(plans.size(), 2u);
  EXPECT_FALSE(plans[0].conv) << "the default keeps cuDNN";
  EXPECT_TRUE(plans[1].conv && plans[1].gemm);
  std::string src;
  int kernels = 0;
  Plan resolved;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plans[1], &src, &kernels, &resolved).ok());
  EXPECT_EQ(kernels, 1) << "the relu runs inside the convolution's kernel";
  EXPECT_NE(src.find("v_relu = _ax_gemm0(v_x, self.conv.weight, self.conv.bias)"), std::string::npos) << src;
  ASSERT_EQ(resolved.gsched.size(), 1u);
  EXPECT_EQ(resolved.gsched[0], DefaultConvSchedule(FormGemms(g, plans[1])[0].second));
  // The input's other layout (read in place) is the next large step.
  ASSERT_GE(plans.size(), 3u);
  EXPECT_TRUE(plans[2].conv && plans[2].conv_native);
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plans[2], &src, &kernels, &resolved).ok());
  EXPECT_EQ(src.find("channels-last"), std::string::npos) << src;
  Plan back;
  ASSERT_TRUE(Plan::FromJson(resolved.ToJson(), &back).ok());
  EXPECT_TRUE(back.conv_native);
}

// A depthwise convolution (one input channel per group, a channel multiplier
// of 2) is direct: its default tile is 1024 rows by its 2 channels, a tl.dot
// tile is not required, and small steps change BM, BN or warps only, never
// the BK, stages or GROUP_M that its kernel does not use.
TEST(Conv, DepthwiseConvolutionsAreDirectAndTunedByRowsChannelsAndWarps) {
  Graph g;
  ASSERT_TRUE(ParseGraph(ConvGraph(Attrs(8, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 8, true), {16, 1, 3, 3},
                                   {2, 16, 9, 10}),
                         &g)
                  .ok());
  Plan conv;
  conv.gemm = conv.conv = true;
  const auto gemms = FormGemms(g, conv);
  ASSERT_EQ(gemms.size(), 1u);
  const GemmOp& op = gemms[0].second;
  ASSERT_TRUE(ConvDirect(op));
  const GemmSchedule d = DefaultConvSchedule(op);
  EXPECT_EQ(d.bm, 1024);
  EXPECT_EQ(d.bn, 2);
  EXPECT_TRUE(ConvScheduleValid(op, d));
  EXPECT_FALSE(ConvScheduleValid(op, GemmSchedule{4096, 4, 8, 1, 4, 1})) << "16384 accumulators";
  GemmOp grouped = op;
  grouped.conv.cin = 16;  // two input channels per group: an implicit GEMM again
  EXPECT_FALSE(ConvDirect(grouped));
  EXPECT_FALSE(ConvScheduleValid(grouped, d));
  std::string src;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", conv, &src).ok());
  EXPECT_EQ(src.find("tl.dot"), std::string::npos) << src;
  EXPECT_NE(src.find("acc += at[:, None] * tl.load(w_col + t)[None, :]"), std::string::npos) << src;
  BuiltinProposer prop(g, "class Model: pass\n");
  search::StepContext ctx;
  ctx.large = false;
  ctx.prompt.parent.source = src;
  ctx.prompt.parent.verdict = "correct, 1.5x faster than eager";
  ctx.parent_correct = true;
  Plan parent;
  ASSERT_TRUE(ParsePlanMarker(src, &parent).ok());
  std::set<std::string> sources{src};
  for (int i = 0; i < 4; ++i) {
    auto p = prop.Propose(ctx);
    ASSERT_FALSE(p.source.empty()) << p.note;
    EXPECT_TRUE(sources.insert(p.source).second) << p.note;
    Plan b;
    ASSERT_TRUE(ParsePlanMarker(p.source, &b).ok());
    const GemmSchedule a = parent.GemmFor(0), c = b.GemmFor(0);
    EXPECT_TRUE(ConvScheduleValid(op, c)) << p.note;
    EXPECT_EQ(c.bk, a.bk) << p.note;
    EXPECT_EQ(c.stages, a.stages) << p.note;
    EXPECT_EQ(c.group_m, a.group_m) << p.note;
  }
}

// The emitted kernel and launcher of one tap-major convolution (input
// channels-last, and read in place) and one flattened convolution, against
// tests/golden/ (golden.h).
TEST(Conv, EmitsTheGoldenKernels) {
  struct Case {
    const char* golden;
    json graph;
    bool native = false;
  };
  json t = Attrs(4, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, true);
  t["output_padding"] = {1, 0};
  const Case cases[] = {
      {"conv2d_tap_major.txt", ConvGraph(Attrs(16, 32, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true), {32, 16, 3, 3},
                                         {2, 32, 5, 5})},
      {"conv2d_tap_major_native.txt",
       ConvGraph(Attrs(16, 32, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true), {32, 16, 3, 3}, {2, 32, 5, 5}), true},
      // (9-1)*2 - 2 + 2 + 1 + 1 = 18, (10-1)*1 - 0 + 2 + 0 + 1 = 12
      {"conv_transpose2d_flat.txt", ConvGraph(t, {4, 3, 3, 2}, {2, 6, 18, 12}, "ConvTranspose2d")},
  };
  for (const Case& c : cases) {
    Graph g;
    ASSERT_TRUE(ParseGraph(c.graph, &g).ok());
    GemmOp op;
    ASSERT_TRUE(ClassifyConv(g, *g.Find("conv"), &op)) << c.golden;
    op.conv_native = c.native;
    std::string src;
    ASSERT_TRUE(EmitConv(g, *g.Find("conv"), op, 0, DefaultConvSchedule(op), nullptr, &src).ok());
    test_golden::ExpectGolden(c.golden, src);
  }
}

}  // namespace
}  // namespace ax::builtin
