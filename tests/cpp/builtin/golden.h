// Golden texts for the builtin compiler's emission tests: a generated text
// compared with tests/golden/<name> (regenerate with AX_UPDATE_GOLDEN=1, then
// review the diff).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ax::builtin::test_golden {

inline void ExpectGolden(const std::string& name, const std::string& text) {
  const std::string path = std::string(ADAEXPLORE_SOURCE_DIR) + "/tests/golden/" + name;
  if (std::getenv("AX_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "emission changed; if intended, rerun with AX_UPDATE_GOLDEN=1 and review " << path;
}

}  // namespace ax::builtin::test_golden
