// The elementwise operator registry (src/builtin/ew_ops.cpp): module classes
// map to registered operators, renderings check their operands, and a few
// expressions keep PyTorch's semantics (NaN through relu and clamp).
#include <gtest/gtest.h>

#include "builtin/ew_ops.h"

namespace ax::builtin {
namespace {

TEST(EwOps, EveryModuleClassIsARegisteredOperator) {
  for (const auto& [cls, fn] : EwModuleOps()) EXPECT_NE(FindEwOp(fn), nullptr) << cls << " -> " << fn;
  EXPECT_GE(EwOpNames().size(), 35u);
}

TEST(EwOps, RendersWithItsOperandsAndRefusesTheUnknown) {
  EwOp relu;
  relu.fn = "relu";
  std::string out;
  ASSERT_TRUE(RenderEw(relu, {"x"}, &out).ok());
  EXPECT_EQ(out, "tl.where(x <= 0.0, 0.0, x)") << "NaN must stay NaN";
  EwOp clamp;
  clamp.fn = "clamp";
  clamp.params = {{"min", -1.0}, {"max", 2.0}};
  ASSERT_TRUE(RenderEw(clamp, {"x"}, &out).ok());
  EXPECT_NE(out.find("tl.maximum(x, -1.0"), std::string::npos) << out;
  EXPECT_NE(out.find("propagate_nan=tl.PropagateNan.ALL"), std::string::npos) << out;
  EwOp sub;
  sub.fn = "sub";
  sub.params = {{"alpha", 2.0}};
  ASSERT_TRUE(RenderEw(sub, {"a", "b"}, &out).ok());
  EXPECT_EQ(out, "a - (2.0 * b)");
  EXPECT_FALSE(RenderEw(sub, {"a"}, &out).ok()) << "sub reads two operands";
  EwOp unknown;
  unknown.fn = "frobnicate";
  Status st = RenderEw(unknown, {"x"}, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("frobnicate"), std::string::npos);
}

}  // namespace
}  // namespace ax::builtin
