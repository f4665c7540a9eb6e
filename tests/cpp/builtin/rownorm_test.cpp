// Row norms (src/builtin/rownorm.h), stage by stage: lowering (a traced node
// to a RowNormOp), scheduling (strategies, defaults, neighbours, the plan's
// JSON) and emission (golden Triton text), then the plan as the proposer
// walks it.
#include <gtest/gtest.h>

#include <set>

#include "builtin/builtin_proposer.h"
#include "builtin/codegen.h"
#include "builtin/pywriter.h"
#include "builtin/rownorm.h"
#include "test_graphs.h"

namespace ax::builtin {
namespace {

using json = nlohmann::json;

using test_graphs::N;
using test_graphs::T;
json Num(double v) { return {{"repr", std::to_string(v)}, {"value", v}}; }
json Int(int64_t v) { return {{"repr", std::to_string(v)}, {"value", v}}; }
json None() { return {{"repr", "None"}}; }

// x [rows, H] -> F.rms_norm(x, (H,), weight, eps) as the tracer writes it.
json FunctionalGraph(int64_t rows, int64_t H, const std::string& dtype, json eps = Num(1e-6), bool weight = true) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()},
                   {"out", T({rows, H}, dtype)}});
  json kwargs = {{"eps", eps}};
  if (weight) {
    nodes.push_back({{"name", "weight"}, {"op", "get_attr"}, {"target", "weight"}, {"args", json::array()},
                     {"out", T({H}, dtype)}});
    kwargs["weight"] = N("weight");
  }
  nodes.push_back({{"name", "rms_norm"}, {"op", "call_function"}, {"target", "rms_norm"},
                   {"callable", "torch.nn.functional.rms_norm"}, {"args", {N("x"), {{"tuple", {Int(H)}}}}},
                   {"kwargs", kwargs}, {"out", T({rows, H}, dtype)}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("rms_norm")}},
                   {"out", T({rows, H}, dtype)}});
  return {{"nodes", nodes}, {"training", true}};
}

// x [4, 16, H] -> nn.RMSNorm(H, eps) at self.norm.
json ModuleGraph(int64_t H, json eps, bool affine = true) {
  json nodes = json::array();
  nodes.push_back({{"name", "x"}, {"op", "placeholder"}, {"target", "x"}, {"args", json::array()},
                   {"out", T({4, 16, H})}});
  json params = json::object();
  if (affine) params["weight"] = {{"shape", {H}}, {"dtype", "torch.float32"}};
  nodes.push_back({{"name", "norm"}, {"op", "call_module"}, {"target", "norm"}, {"args", {N("x")}},
                   {"out", T({4, 16, H})},
                   {"module",
                    {{"class", "RMSNorm"},
                     {"attrs", {{"eps", eps}, {"normalized_shape", {H}}, {"elementwise_affine", affine}}},
                     {"params", params}}}});
  nodes.push_back({{"name", "output"}, {"op", "output"}, {"target", "output"}, {"args", {N("norm")}},
                   {"out", T({4, 16, H})}});
  return {{"nodes", nodes}, {"training", true}};
}

RowNormOp Lower(const json& graph, const std::string& node) {
  Graph g;
  EXPECT_TRUE(ParseGraph(graph, &g).ok());
  RowNormOp op;
  EXPECT_TRUE(ClassifyRowNorm(g, *g.Find(node), &op));
  return op;
}

bool Lowers(const json& graph, const std::string& node) {
  Graph g;
  if (!ParseGraph(graph, &g).ok()) return false;
  RowNormOp op;
  return ClassifyRowNorm(g, *g.Find(node), &op);
}

// ================================================================ lowering

TEST(RowNormLowering, FunctionalWithWeight) {
  RowNormOp op = Lower(FunctionalGraph(1024, 4096, "torch.bfloat16"), "rms_norm");
  EXPECT_EQ(op.input, "x");
  EXPECT_EQ(op.rows, 1024);
  EXPECT_EQ(op.H, 4096);
  EXPECT_DOUBLE_EQ(op.eps, 1e-6);
  EXPECT_EQ(op.out_dtype, "torch.bfloat16");
  EXPECT_EQ(op.ElementBytes(), 2);
  EXPECT_EQ(op.weight, RowNormOp::Weight::kNode);
  EXPECT_EQ(op.weight_ref, "weight");
}

TEST(RowNormLowering, EpsNoneIsTheDtypesEpsilon) {
  EXPECT_DOUBLE_EQ(Lower(FunctionalGraph(8, 64, "torch.float32", None(), false), "rms_norm").eps,
                   1.1920928955078125e-07);
  EXPECT_DOUBLE_EQ(Lower(FunctionalGraph(8, 64, "torch.bfloat16", None()), "rms_norm").eps, 0.0078125);
  EXPECT_DOUBLE_EQ(Lower(FunctionalGraph(8, 64, "torch.float16", None()), "rms_norm").eps, 0.0009765625);
  EXPECT_EQ(Lower(FunctionalGraph(8, 64, "torch.float32", None(), false), "rms_norm").weight, RowNormOp::Weight::kNone);
}

TEST(RowNormLowering, Module) {
  RowNormOp op = Lower(ModuleGraph(1024, 1e-5), "norm");
  EXPECT_EQ(op.rows, 64);
  EXPECT_EQ(op.H, 1024);
  EXPECT_DOUBLE_EQ(op.eps, 1e-5);
  EXPECT_EQ(op.weight, RowNormOp::Weight::kModule);
  EXPECT_EQ(op.weight_ref, "norm");
  EXPECT_DOUBLE_EQ(Lower(ModuleGraph(1024, nullptr), "norm").eps, 1.1920928955078125e-07);
  EXPECT_EQ(Lower(ModuleGraph(1024, 1e-5, false), "norm").weight, RowNormOp::Weight::kNone);
}

TEST(RowNormLowering, RefusesWhatItCannotGenerate) {
  json g = FunctionalGraph(8, 64, "torch.float32");
  g["nodes"][2]["args"][1] = {{"tuple", {Int(32)}}};  // not the trailing dimension's size
  EXPECT_FALSE(Lowers(g, "rms_norm"));
  g = FunctionalGraph(8, 64, "torch.float64");  // no float64 kernels
  EXPECT_FALSE(Lowers(g, "rms_norm"));
  g = FunctionalGraph(8, 64, "torch.float32");
  g["nodes"][1]["out"] = T({32});  // a weight of another shape
  EXPECT_FALSE(Lowers(g, "rms_norm"));
  g = FunctionalGraph(8, 64, "torch.float32", json{{"node", "x"}});  // eps from a tensor
  EXPECT_FALSE(Lowers(g, "rms_norm"));
  EXPECT_TRUE(Lowers(FunctionalGraph(8, 64, "torch.float32"), "rms_norm"));
}

// ================================================================ scheduling

RowNormOp Op(int64_t rows, int64_t H, const std::string& dtype = "torch.bfloat16") {
  return Lower(FunctionalGraph(rows, H, dtype), "rms_norm");
}

TEST(RowNormSchedule, StrategiesByRowLength) {
  using S = RowNormStrategy;
  EXPECT_EQ(RowNormStrategies(Op(4096, 512)), (std::vector<S>{S::kMultiRow, S::kWholeRow, S::kSplitRow}));
  EXPECT_EQ(RowNormStrategies(Op(1024, 4096)), (std::vector<S>{S::kWholeRow, S::kMultiRow, S::kSplitRow}));
  // one row: no rows to share a program
  EXPECT_EQ(RowNormStrategies(Op(1, 4096)), (std::vector<S>{S::kWholeRow, S::kSplitRow}));
  // 65536 elements do not fit one program's registers
  EXPECT_EQ(RowNormStrategies(Op(16, 65536, "torch.float32")), (std::vector<S>{S::kSplitRow}));
}

TEST(RowNormSchedule, DefaultsFitTheRow) {
  RowNormSchedule s;
  // whole row: the power-of-two tile, 16 bytes x 4 per thread
  ASSERT_TRUE(DefaultRowNormSchedule(Op(1024, 4096), RowNormStrategy::kWholeRow, &s));
  EXPECT_EQ(s.block, 4096);
  EXPECT_EQ(s.warps, 4);
  ASSERT_TRUE(DefaultRowNormSchedule(Op(1024, 4096, "torch.float32"), RowNormStrategy::kWholeRow, &s));
  EXPECT_EQ(s.warps, 8);
  // 5120 is not a power of two: the whole row's tile is 8192 (masked); a
  // split row walks it in chunks of 1024 that divide it (no masks)
  ASSERT_TRUE(DefaultRowNormSchedule(Op(128, 5120), RowNormStrategy::kWholeRow, &s));
  EXPECT_EQ(s.block, 8192);
  ASSERT_TRUE(DefaultRowNormSchedule(Op(128, 5120), RowNormStrategy::kSplitRow, &s));
  EXPECT_EQ(s.block, 1024);
  EXPECT_EQ(s.stages, 2);
  // several rows: about 8192 elements per program, no more rows than exist
  ASSERT_TRUE(DefaultRowNormSchedule(Op(1024, 2048), RowNormStrategy::kMultiRow, &s));
  EXPECT_EQ(s.rows, 4);
  ASSERT_TRUE(DefaultRowNormSchedule(Op(2, 512), RowNormStrategy::kMultiRow, &s));
  EXPECT_EQ(s.rows, 2);
}

TEST(RowNormSchedule, NeighboursChangeOneKnobAndStayValid) {
  for (const RowNormOp& op : {Op(1024, 4096), Op(16, 5120, "torch.float32"), Op(32768, 2048)}) {
    for (RowNormStrategy st : RowNormStrategies(op)) {
      RowNormSchedule s;
      ASSERT_TRUE(DefaultRowNormSchedule(op, st, &s));
      const auto ns = RowNormNeighbours(op, s);
      EXPECT_FALSE(ns.empty());
      std::set<std::string> seen;
      for (const auto& c : ns) {
        EXPECT_TRUE(c.ValidFor(op));
        EXPECT_EQ(c.strategy, s.strategy);  // a small step keeps the strategy
        int changed = (c.rows != s.rows) + (c.block != s.block) + (c.warps != s.warps) + (c.stages != s.stages);
        EXPECT_EQ(changed, 1) << c.Describe();
        EXPECT_TRUE(seen.insert(c.ToJson().dump()).second);
      }
    }
  }
}

TEST(RowNormSchedule, JsonRoundTripAndBadSchedules) {
  RowNormSchedule s{RowNormStrategy::kSplitRow, 1, 1024, 4, 3};
  RowNormSchedule back;
  ASSERT_TRUE(RowNormSchedule::FromJson(s.ToJson(), &back).ok());
  EXPECT_EQ(back, s);
  EXPECT_EQ(s.ToJson().dump(), R"(["split",1,1024,4,3])");
  EXPECT_FALSE(RowNormSchedule::FromJson(json::parse(R"(["diagonal",1,1024,4,1])"), &back).ok());
  EXPECT_FALSE(RowNormSchedule::FromJson(json::parse(R"(["whole",1,1000,4,1])"), &back).ok());
  EXPECT_FALSE(RowNormSchedule::FromJson(json::parse(R"(["whole",1,1024,64,1])"), &back).ok());
  EXPECT_FALSE(RowNormSchedule::FromJson(json::parse(R"(["whole",1,1024])"), &back).ok());
}

// ================================================================ emission

TEST(PyWriter, IndentsBlocks) {
  PyWriter w;
  {
    auto f = w.Open("def f(x):");
    w.Line("y = x");
    {
      auto l = w.Open("for i in range(3):");
      w.Line("y = y + i");
    }
    w.Line("return y");
  }
  w.Line();
  EXPECT_EQ(w.str(), "def f(x):\n    y = x\n    for i in range(3):\n        y = y + i\n    return y\n\n");
}

TEST(RowNormEmission, WholeRowsGolden) {
  RowNormOp op = Op(1024, 4096);
  RowNormSchedule s{RowNormStrategy::kMultiRow, 2, 4096, 8, 1};
  std::string src;
  ASSERT_TRUE(EmitRowNorm(op, 0, s, &src).ok());
  EXPECT_EQ(src, R"(@triton.jit
def _ax_rnorm0_kernel(x_ptr, w_ptr, o_ptr):
    # RMSNorm over rows of 4096 (1024 rows): 2 rows per program, 8 warps
    pid = tl.program_id(0)
    rows = pid * 2 + tl.arange(0, 2)
    cols = tl.arange(0, 4096)
    offs = rows[:, None] * 4096 + cols[None, :]
    x = tl.load(x_ptr + offs).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=1) / 4096.0 + 9.9999999999999995e-07)
    y = x * r[:, None]
    wt = tl.load(w_ptr + cols).to(tl.float32)
    y = y * wt[None, :]
    tl.store(o_ptr + offs, y.to(o_ptr.dtype.element_ty))


def _ax_rnorm0(x, w):
    if tuple(x.shape) != (1024, 4096):
        raise RuntimeError("_ax_rnorm0: the kernel was generated for shape [1024, 4096], got " + str(list(x.shape)))
    x = x.contiguous()
    w = w.contiguous()
    out = torch.empty([1024, 4096], device=x.device, dtype=torch.bfloat16)
    _ax_rnorm0_kernel[(512,)](x, w, out, num_warps=8)
    return out


)");
}

TEST(RowNormEmission, MasksOnlyWhereTheTileOverhangs) {
  // 5120 in an 8192 tile: the columns are masked; 3 rows in tiles of 2: the rows too.
  RowNormOp op = Op(3, 5120);
  std::string src;
  ASSERT_TRUE(EmitRowNorm(op, 1, {RowNormStrategy::kMultiRow, 2, 8192, 8, 1}, &src).ok());
  EXPECT_NE(src.find("mask = (rows < 3)[:, None] & (cols < 5120)[None, :]"), std::string::npos);
  EXPECT_NE(src.find("x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)"), std::string::npos);
  EXPECT_NE(src.find("_ax_rnorm1_kernel[(2,)]"), std::string::npos);
  // A schedule that does not fit is an error, not a kernel.
  EXPECT_FALSE(EmitRowNorm(op, 1, {RowNormStrategy::kWholeRow, 1, 4096, 8, 1}, &src).ok());
}

TEST(RowNormEmission, SplitRowGolden) {
  RowNormOp op = Lower(FunctionalGraph(16, 5120, "torch.float32", None(), false), "rms_norm");
  std::string src;
  ASSERT_TRUE(EmitRowNorm(op, 0, {RowNormStrategy::kSplitRow, 1, 1024, 4, 2}, &src).ok());
  EXPECT_EQ(src, R"(@triton.jit
def _ax_rnorm0_kernel(x_ptr, w_ptr, o_ptr):
    # RMSNorm over rows of 5120 (16 rows): split row, chunk 1024, 2 stages, 4 warps
    row = tl.program_id(0)
    xr = x_ptr + row * 5120
    orow = o_ptr + row * 5120
    acc = tl.zeros([1024], dtype=tl.float32)
    for start in tl.range(0, 5120, 1024, num_stages=2):
        c = start + tl.arange(0, 1024)
        x = tl.load(xr + c).to(tl.float32)
        acc += x * x
    r = tl.rsqrt(tl.sum(acc, axis=0) / 5120.0 + 1.1920928955078125e-07)
    for start in tl.range(0, 5120, 1024, num_stages=2):
        c = start + tl.arange(0, 1024)
        y = tl.load(xr + c).to(tl.float32) * r
        tl.store(orow + c, y.to(o_ptr.dtype.element_ty))


def _ax_rnorm0(x):
    if tuple(x.shape) != (16, 5120):
        raise RuntimeError("_ax_rnorm0: the kernel was generated for shape [16, 5120], got " + str(list(x.shape)))
    x = x.contiguous()
    out = torch.empty([16, 5120], device=x.device, dtype=torch.float32)
    _ax_rnorm0_kernel[(16,)](x, x, out, num_warps=4)
    return out


)");
}

// ================================================================ plans

TEST(RowNormPlans, LargeStepsPickStrategiesSmallStepsTuneThem) {
  Graph g;
  ASSERT_TRUE(ParseGraph(FunctionalGraph(1024, 4096, "torch.bfloat16"), &g).ok());
  BuiltinProposer prop(g, "import torch\n");
  std::vector<std::string> strategies;
  for (const Plan& p : prop.LargePlans()) {
    std::string src;
    if (!Generate(g, "", p, &src).ok()) continue;
    Plan written;
    ASSERT_TRUE(ParsePlanMarker(src, &written).ok());
    ASSERT_EQ(written.nsched.size(), 1u);
    strategies.push_back(RowNormStrategyName(written.nsched[0].strategy));
  }
  ASSERT_GE(strategies.size(), 3u);
  EXPECT_EQ(strategies[0], "whole");
  EXPECT_EQ(std::set<std::string>(strategies.begin(), strategies.end()),
            (std::set<std::string>{"whole", "rows", "split"}));
  // The launcher call replaces the PyTorch call in forward, with the weight.
  std::string src;
  ASSERT_TRUE(Generate(g, "", Plan(), &src).ok());
  EXPECT_NE(src.find("v_rms_norm = _ax_rnorm0(v_x, v_weight)"), std::string::npos);
  EXPECT_EQ(src.find("rms_norm("), std::string::npos);

  // A small step from the default keeps the strategy and changes one knob.
  search::StepContext ctx;
  ctx.large = false;
  ctx.prompt.parent.source = src;
  ctx.prompt.parent.verdict = "correct, 1.1x faster than eager";
  ctx.parent_correct = true;
  search::Proposal p = prop.Propose(ctx);
  ASSERT_FALSE(p.source.empty()) << p.note;
  EXPECT_NE(p.note.find("row norm 0: whole row in registers, 4 warps -> whole row in registers,"), std::string::npos)
      << p.note;
}

TEST(RowNormPlans, ModuleWeightIsReadFromTheModule) {
  Graph g;
  ASSERT_TRUE(ParseGraph(ModuleGraph(1024, 1e-5), &g).ok());
  std::string src;
  int kernels = 0;
  ASSERT_TRUE(Generate(g, "", Plan(), &src, &kernels).ok());
  EXPECT_EQ(kernels, 1);
  EXPECT_NE(src.find("v_norm = _ax_rnorm0(v_x, self.norm.weight)"), std::string::npos);
  // Left to PyTorch under library_reductions: nothing to generate.
  Plan lib;
  lib.library_reductions = true;
  EXPECT_FALSE(Generate(g, "", lib, &src).ok());
}

}  // namespace
}  // namespace ax::builtin
