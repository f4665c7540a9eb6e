// `adaexplore compile`: the builtin compiler's output for one task, without
// judging it. Traces the task through the judge's worker, then writes the
// candidate source of each plan: the large-step plans in the order the search
// proposes them, or the plans given with --plan (JSON, or @FILE holding JSON
// or a generated source whose marker comment names its plan).
//
//   compile TASK [--plan JSON|@FILE]... [--out DIR] [--json]
//           [--device D] [--precision P] [--python PATH]
//
// Without --out, one --plan prints its source to stdout; otherwise each plan
// is listed (index, kernels, launches, description; --json: one object per
// line) and, with --out, written to DIR/plan_NN.py with DIR/plans.jsonl.
// Exit 0 when every plan generated; 1 when the task cannot be traced or a
// given plan does not generate; 2 bad usage; 3 the worker cannot start.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli/judge_flags.h"

namespace ax::cli {

struct CompileFlags {
  std::string task;
  std::vector<std::string> plans;  // JSON text or @FILE
  std::string out;
  bool json = false;
  CommonFlags common;
  JudgeFlags judge;
};

void RegisterCompileCommand(CLI::App& app, CompileFlags* f, CLI::App** sub);
int RunCompileCommand(CompileFlags& f);

}  // namespace ax::cli
