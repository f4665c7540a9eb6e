// The CUDA graph plan without Python: the launches a forward makes, the
// wrapper codegen writes, the plan's round trip, and when the proposer offers
// it (a large step for a forward of many launches, a small step where the
// parent's profile shows the GPU idle between launches).
#include <gtest/gtest.h>

#include "builtin/builtin_proposer.h"
#include "builtin/codegen.h"
#include "builtin/graph_capture.h"
#include "builtin/schedule.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;

using test_graphs::N;
using test_graphs::T;

// x -> `layers` x (Linear -> relu) -> flatten -> output: a deep MLP.
json MlpGraph(int layers) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({4, 16})}});
  std::string prev = "x";
  for (int i = 0; i < layers; ++i) {
    const std::string fc = "fc" + std::to_string(i), relu = "relu" + std::to_string(i);
    nodes.push_back({{"name", fc}, {"op", "call_module"}, {"target", "layers." + std::to_string(2 * i)},
                     {"module", test_graphs::LinearModule(16, 16, true)}, {"args", {N(prev)}}, {"out", T({4, 16})}});
    nodes.push_back({{"name", relu}, {"op", "call_function"}, {"target", "relu"}, {"callable", "torch.relu"},
                     {"args", {N(fc)}}, {"out", T({4, 16})}});
    prev = relu;
  }
  nodes.push_back({{"name", "flat"}, {"op", "call_method"}, {"target", "flatten"}, {"args", {N(prev)}},
                   {"out", T({64})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("flat")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

TEST(GraphCapture, LaunchesCountKernelsAndLibraryCallsNotViews) {
  Graph g;
  ASSERT_TRUE(ParseGraph(MlpGraph(3), &g).ok());
  // Linear layers left to PyTorch: 3 library calls and 3 relu kernels; the flatten launches nothing.
  EXPECT_EQ(ForwardLaunches(g, Schedule(g, Plan())), 6);
  // Generated GEMMs with the relus as their epilogues: 3 kernels.
  Plan gemm;
  gemm.gemm = true;
  EXPECT_EQ(ForwardLaunches(g, Schedule(g, gemm)), 3);
}

TEST(GraphCapture, TheForwardIsReplayedFromAGraphAndThePlanSaysSo) {
  Graph g;
  ASSERT_TRUE(ParseGraph(MlpGraph(2), &g).ok());
  Plan plan;
  plan.gemm = true;
  plan.cuda_graph = true;
  std::string src;
  Plan resolved;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plan, &src, nullptr, &resolved).ok());
  EXPECT_TRUE(resolved.cuda_graph);
  EXPECT_NE(src.find("def _ax_graphed(module, forward, args, stale=None):"), std::string::npos) << src;
  EXPECT_NE(src.find("    def forward(self, v_x):\n        return _ax_graphed(self, self._ax_forward, (v_x,))\n"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("    def _ax_forward(self, v_x):\n"), std::string::npos) << src;
  // the copy into the graph's buffers and the clone of its outputs are in every call
  EXPECT_NE(src.find("dst.copy_(src)"), std::string::npos);
  EXPECT_NE(src.find("return _ax_graph_clone(out)"), std::string::npos);
  Plan marked;
  ASSERT_TRUE(ParsePlanMarker(src, &marked).ok());
  EXPECT_TRUE(marked.cuda_graph);
  Plan back;
  ASSERT_TRUE(Plan::FromJson(plan.ToJson(), &back).ok());
  EXPECT_TRUE(back.cuda_graph);
  // Without the plan, no helper and the forward as it was.
  plan.cuda_graph = false;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plan, &src).ok());
  EXPECT_EQ(src.find("_ax_graphed"), std::string::npos);
  EXPECT_NE(src.find("    def forward(self, v_x):\n"), std::string::npos);
}

// The forward's arguments reach the graph as one tuple, whatever their number.
TEST(GraphCapture, EveryArgumentReachesTheGraphedForward) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T({4, 16})}});
  nodes.push_back({{"name", "y"}, {"op", "placeholder"}, {"target", "y"}, {"args", json::array()}, {"out", T({4, 16})}});
  nodes.push_back({{"name", "add"}, {"op", "call_function"}, {"target", "add"}, {"callable", "operator.add"},
                   {"args", {N("x"), N("y")}}, {"out", T({4, 16})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("add")}},
                   {"out", {{"kind", "other"}}}});
  Graph g;
  ASSERT_TRUE(ParseGraph(json{{"nodes", nodes}, {"training", true}}, &g).ok());
  Plan plan;
  plan.cuda_graph = true;
  std::string src;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plan, &src).ok());
  EXPECT_NE(src.find("    def forward(self, v_x, v_y):\n        return _ax_graphed(self, self._ax_forward, (v_x, v_y))\n"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("    def _ax_forward(self, v_x, v_y):\n"), std::string::npos) << src;
}

TEST(GraphCapture, ALargeStepForAForwardOfManyLaunchesOnly) {
  Graph deep, shallow;
  ASSERT_TRUE(ParseGraph(MlpGraph(kGraphMinLaunches), &deep).ok());
  ASSERT_TRUE(ParseGraph(MlpGraph(2), &shallow).ok());
  BuiltinProposer many(deep, "class Model: pass\n");
  const std::vector<Plan> plans = many.LargePlans();
  ASSERT_GE(plans.size(), 2u);
  EXPECT_FALSE(plans[0].cuda_graph);
  // the first plan again, from a graph, second
  Plan graphed = plans[0];
  graphed.cuda_graph = true;
  EXPECT_EQ(plans[1].ToJson(), graphed.ToJson());
  BuiltinProposer few(shallow, "class Model: pass\n");
  for (const Plan& p : few.LargePlans()) EXPECT_FALSE(p.cuda_graph);
}

// x, h0 -> nn.GRU(layers, bidirectional) -> [0]: one library call that steps
// through the sequence, and nothing for the compiler to fuse.
// A GRU (input 128, hidden 256, batch 10) and its output. With `generated`,
// the module reports what ClassifyRnn needs (its dropout and its weights).
json GruGraph(int64_t seq, int64_t layers, bool bidirectional, bool batch_first, bool generated = false) {
  json nodes = json::array();
  const std::vector<int64_t> xs = batch_first ? std::vector<int64_t>{10, seq, 128} : std::vector<int64_t>{seq, 10, 128};
  const int64_t dirs = bidirectional ? 2 : 1;
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()}, {"out", T(xs)}});
  nodes.push_back({{"name", "h0"}, {"op", "placeholder"}, {"target", "h0"}, {"args", json::array()},
                   {"out", T({layers * dirs, 10, 256})}});
  json module = {{"class", "GRU"},
                 {"attrs", {{"hidden_size", 256}, {"num_layers", layers}, {"bidirectional", bidirectional},
                            {"batch_first", batch_first}, {"bias", true}}},
                 {"params", json::object()}};
  if (generated) {
    module["attrs"]["dropout"] = 0.0;
    module["attrs"]["mode"] = "GRU";
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t d = 0; d < dirs; ++d) {
        const std::string sfx = std::to_string(l) + (d ? "_reverse" : "");
        const int64_t in = l == 0 ? 128 : 256 * dirs;
        module["params"]["weight_ih_l" + sfx] = {{"shape", {768, in}}, {"dtype", "torch.float32"}};
        module["params"]["weight_hh_l" + sfx] = {{"shape", {768, 256}}, {"dtype", "torch.float32"}};
        module["params"]["bias_ih_l" + sfx] = {{"shape", {768}}, {"dtype", "torch.float32"}};
        module["params"]["bias_hh_l" + sfx] = {{"shape", {768}}, {"dtype", "torch.float32"}};
      }
    }
  }
  nodes.push_back({{"name", "gru"}, {"op", "call_module"}, {"target", "gru"}, {"module", module},
                   {"args", {N("x"), N("h0")}}, {"out", {{"kind", "tuple"}}}});
  nodes.push_back({{"name", "getitem"}, {"op", "call_function"}, {"target", "getitem"}, {"callable", "operator.getitem"},
                   {"args", {N("gru"), {{"repr", "0"}, {"value", 0}}}}, {"out", T({seq, 10, 256 * dirs})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("getitem")}},
                   {"out", {{"kind", "other"}}}});
  return {{"nodes", nodes}, {"training", true}};
}

TEST(GraphCapture, ARecurrentModuleLaunchesPerStepLayerAndDirection) {
  Graph g;
  ASSERT_TRUE(ParseGraph(GruGraph(512, 6, false, false), &g).ok());
  EXPECT_EQ(ForwardLaunches(g, Schedule(g, Plan())), 512 * 6);
  ASSERT_TRUE(ParseGraph(GruGraph(7, 3, true, true), &g).ok());
  EXPECT_EQ(ForwardLaunches(g, Schedule(g, Plan())), 7 * 3 * 2);
}

// A recurrent network (the last step's features through a Linear head): its
// few Triton kernels come with a recurrent module's launches per time step,
// so its first plan is offered again from a CUDA graph. A recurrent module
// that is not generated (here: its trace lacks the weights) alone is no
// candidate, graphed or not: a candidate needs a kernel of its own.
TEST(GraphCapture, ARecurrentNetworkIsOfferedGraphedButALoneModuleIsNot) {
  json lone = GruGraph(512, 6, false, false);
  Graph g;
  ASSERT_TRUE(ParseGraph(lone, &g).ok());
  Plan graphed;
  graphed.cuda_graph = true;
  std::string src;
  EXPECT_EQ(Generate(g, "class Model: pass\n", graphed, &src).code(), StatusCode::kUnsupported);

  json net = lone;
  json& nodes = net["nodes"];
  nodes.erase(nodes.size() - 1);  // the output
  nodes.push_back({{"name", "last"}, {"op", "call_function"}, {"target", "getitem"}, {"callable", "operator.getitem"},
                   {"args", {N("getitem"), {{"repr", "-1"}, {"value", -1}}}}, {"out", T({10, 256})}});
  nodes.push_back({{"name", "fc"}, {"op", "call_module"}, {"target", "fc"}, {"module", test_graphs::LinearModule(256, 16, true)},
                   {"args", {N("last")}}, {"out", T({10, 16})}});
  nodes.push_back({{"name", "relu"}, {"op", "call_function"}, {"target", "relu"}, {"callable", "torch.relu"},
                   {"args", {N("fc")}}, {"out", T({10, 16})}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("relu")}},
                   {"out", {{"kind", "other"}}}});
  ASSERT_TRUE(ParseGraph(net, &g).ok());
  BuiltinProposer proposer(g, "class Model: pass\n");
  const std::vector<Plan> plans = proposer.LargePlans();
  ASSERT_GE(plans.size(), 2u);
  EXPECT_FALSE(plans[0].cuda_graph);
  EXPECT_TRUE(plans[1].cuda_graph);
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plans[1], &src).ok());
  EXPECT_NE(src.find("self.gru(v_x, v_h0)"), std::string::npos) << src;
  EXPECT_NE(src.find("return _ax_graphed(self, self._ax_forward, (v_x, v_h0))"), std::string::npos) << src;
}

// A lone recurrent module that the compiler generates: its plan comes first,
// replayed from a CUDA graph (one launch per wavefront, unidirectional, or
// per layer and step, bidirectional), then launched as it is.
TEST(GraphCapture, AGeneratedRecurrentModuleIsOfferedFirstAndGraphed) {
  Graph g;
  ASSERT_TRUE(ParseGraph(GruGraph(512, 6, false, false, true), &g).ok());
  Plan rnn;
  rnn.recurrent = true;
  EXPECT_EQ(ForwardLaunches(g, Schedule(g, rnn)), 512 + 6 - 1);
  BuiltinProposer proposer(g, "class Model: pass\n");
  const std::vector<Plan> plans = proposer.LargePlans();
  ASSERT_GE(plans.size(), 2u);
  EXPECT_TRUE(plans[0].recurrent && plans[0].cuda_graph);
  EXPECT_TRUE(plans[1].recurrent && !plans[1].cuda_graph);
  std::string src;
  ASSERT_TRUE(Generate(g, "class Model: pass\n", plans[0], &src).ok());
  EXPECT_NE(src.find("_ax_rnn0(v_x, v_h0, self.gru)"), std::string::npos) << src;
  EXPECT_NE(src.find("for w in range(517):"), std::string::npos) << src;
  // A profile names its kernel; its schedule travels as JSON and bad ones are refused.
  const FusedSchedule fs = Schedule(g, rnn);
  ASSERT_TRUE(KernelOfName(fs, "_ax_rnn_kernel0").has_value());
  EXPECT_EQ(KernelOfName(fs, "_ax_rnn_kernel0")->kind, KernelKind::kRecurrent);
  EXPECT_FALSE(KernelOfName(fs, "_ax_rnn_kernel1").has_value());
  ASSERT_TRUE(KernelOfName(fs, "_ax_rnn_proj0").has_value());  // a layer-by-layer stack's projections
  EXPECT_EQ(KernelOfName(fs, "_ax_rnn_proj0")->index, 0u);
  RnnSchedule rs;
  ASSERT_TRUE(RnnSchedule::FromJson(fs.resolved.rsched.at(0).ToJson(), &rs).ok());
  EXPECT_EQ(rs, fs.resolved.rsched[0]);
  EXPECT_FALSE(RnnSchedule::FromJson(json::array({8, 32, 16, 2, 2}), &rs).ok());  // BJ below 16
  EXPECT_FALSE(RnnSchedule::FromJson(json::array({16, 32, 16, 2}), &rs).ok());
  ASSERT_TRUE(ParseGraph(GruGraph(7, 3, true, true, true), &g).ok());
  EXPECT_EQ(ForwardLaunches(g, Schedule(g, rnn)), 7 * 3);
  ASSERT_TRUE(Generate(g, "class Model: pass\n", rnn, &src).ok());
  EXPECT_NE(src.find("grid = (triton.cdiv(256, 16), 2, 1)"), std::string::npos) << src;
  EXPECT_NE(src.find("seq[0, :, :, :128] = x.transpose(0, 1)"), std::string::npos) << src;
}

// A small step from a measured parent: graphed first when its kernels kept
// the GPU busy for less than kGraphBusyShare of its time, else a tile.
TEST(GraphCapture, ASmallStepWhereTheParentsProfileShowsLaunchGaps) {
  Graph g;
  ASSERT_TRUE(ParseGraph(MlpGraph(3), &g).ok());
  auto small_step = [&](double busy_ms, double runtime_ms) {
    BuiltinProposer prop(g, "class Model: pass\n");
    search::StepContext ctx;
    ctx.large = true;
    auto first = prop.Propose(ctx);
    EXPECT_FALSE(first.source.empty()) << first.note;
    ctx.large = false;
    ctx.parent_correct = true;
    ctx.parent_plan = first.plan;
    ctx.parent_runtime_ms = runtime_ms;
    ctx.parent_kernels = {{"_ax_gemm_kernel0", busy_ms / 2}, {"_ax_gemm_kernel1", busy_ms / 4},
                          {"_ax_gemm_kernel2", busy_ms / 4}};
    auto p = prop.Propose(ctx);
    Plan a, b;
    EXPECT_TRUE(Plan::FromJson(first.plan, &a).ok());
    EXPECT_TRUE(Plan::FromJson(p.plan, &b).ok()) << p.note;
    a.cuda_graph = b.cuda_graph;
    EXPECT_EQ(a.ToJson() == b.ToJson(), b.cuda_graph) << p.note;  // only the graph changed, or not it
    return std::make_pair(b.cuda_graph, p.note);
  };
  auto [gaps, note] = small_step(0.03, 0.1);
  EXPECT_TRUE(gaps) << note;
  EXPECT_NE(note.find("busy 30% of its 0.1 ms"), std::string::npos) << note;
  auto [busy, note2] = small_step(0.095, 0.1);
  EXPECT_FALSE(busy) << note2;
  auto [unmeasured, note3] = small_step(0.03, 0);
  EXPECT_FALSE(unmeasured) << note3;
}

// Once per task: a second parent with gaps gets a tile step, not the graph again.
TEST(GraphCapture, TheGraphSmallStepIsTakenOncePerTask) {
  Graph g;
  ASSERT_TRUE(ParseGraph(MlpGraph(3), &g).ok());
  BuiltinProposer prop(g, "class Model: pass\n");
  search::StepContext ctx;
  ctx.large = true;
  auto first = prop.Propose(ctx);
  auto second = prop.Propose(ctx);
  ASSERT_FALSE(first.source.empty());
  ASSERT_FALSE(second.source.empty());
  ctx.large = false;
  ctx.parent_correct = true;
  ctx.parent_runtime_ms = 0.1;
  ctx.parent_kernels = {{"_ax_gemm_kernel0", 0.01}};
  Plan b;
  ctx.parent_plan = first.plan;
  ASSERT_TRUE(Plan::FromJson(prop.Propose(ctx).plan, &b).ok());
  EXPECT_TRUE(b.cuda_graph);
  ctx.parent_plan = second.plan;
  auto again = prop.Propose(ctx);
  ASSERT_TRUE(Plan::FromJson(again.plan, &b).ok()) << again.note;
  EXPECT_FALSE(b.cuda_graph) << again.note;
}

}  // namespace
}  // namespace ax::builtin
