// The elementwise operator registry: every operator the compiler generates,
// by its canonical name, with its arity and its Triton rendering, and the
// torch module classes that are one of them. Classification (fuse.cpp) maps
// a traced call to an EwOp; everything that turns an EwOp into code is here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "builtin/fuse.h"
#include "common/status.h"

namespace ax::builtin {

struct EwOpDef {
  int operands = 1;  // tensor or number operands the rendering reads
  // The Triton expression of op over its operands' expressions.
  std::string (*render)(const EwOp& op, const std::vector<std::string>& a) = nullptr;
};

// The registered operator of canonical name fn, or nullptr.
const EwOpDef* FindEwOp(const std::string& fn);

// Every registered operator's canonical name, sorted.
std::vector<std::string> EwOpNames();

// Module classes that are one elementwise operator (nn.ReLU -> relu, ...).
const std::map<std::string, std::string>& EwModuleOps();

// The Triton expression of op over operand expressions a; an error for an
// operator that is not registered or too few operands.
Status RenderEw(const EwOp& op, const std::vector<std::string>& a, std::string* out);

}  // namespace ax::builtin
