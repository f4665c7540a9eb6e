#include "cli/compile_cmd.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "builtin/builtin_proposer.h"
#include "builtin/plan.h"
#include "cli/cli_support.h"
#include "common/util.h"

namespace ax::cli {

namespace {

using nlohmann::json;

// One --plan value: JSON text, or @FILE with JSON or a generated source.
Status ReadPlanArg(const std::string& arg, ax::builtin::Plan* out) {
  std::string text = arg;
  if (!arg.empty() && arg[0] == '@') {
    auto body = ReadFile(arg.substr(1));
    if (!body) return Status::Error(StatusCode::kInvalidInput, "cannot read plan file: " + arg.substr(1));
    if (body->find(ax::builtin::kPlanMarker) != std::string::npos) {
      Status s = ax::builtin::ParsePlanMarker(*body, out);
      return s.ok() ? s : Status::Error(StatusCode::kInvalidInput, arg.substr(1) + ": " + s.message());
    }
    text = *body;
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Error(StatusCode::kInvalidInput, "--plan is not a JSON object: " + text.substr(0, 80));
  }
  Status s = ax::builtin::Plan::FromJson(j, out);
  return s.ok() ? s : Status::Error(StatusCode::kInvalidInput, "--plan: " + s.message());
}

std::string Index(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02zu", i);
  return buf;
}

}  // namespace

void RegisterCompileCommand(CLI::App& app, CompileFlags* f, CLI::App** sub) {
  CLI::App* c = app.add_subcommand("compile", "write the builtin compiler's candidate sources for a task, without judging them");
  *sub = c;
  c->add_option("TASK", f->task, "task file, KernelBench levelN/ID, or kernelbench:ROOT:LEVEL:ID")->required();
  c->add_option("--plan", f->plans,
                "a plan to generate: JSON (as a source's '# adaexplore-plan:' line) or @FILE (JSON, or a generated "
                "source); repeatable (default: the large-step plans)");
  c->add_option("--out", f->out, "folder for plan_NN.py and plans.jsonl (default: list only; one --plan: its source on stdout)");
  c->add_flag("--json", f->json, "list the plans as JSON lines");
  AddCommon(c, &f->common);
  c->add_option("--precision", f->judge.precision, "fp32 (default), fp16 or bf16: the dtype the task is traced in");
}

int RunCompileCommand(CompileFlags& f) {
  std::vector<ax::builtin::Plan> given;
  for (const std::string& arg : f.plans) {
    ax::builtin::Plan p;
    if (Status s = ReadPlanArg(arg, &p); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    given.push_back(std::move(p));
  }
  JudgeOptions opts;
  if (!CheckOptions(&f.common, f.judge, &opts)) return kExitBadInput;
  TaskRef task;
  if (!OneTask(f.task, &task)) return kExitBadInput;
  auto judge = MakeJudgeOrFail(f.common, 1, 1);
  if (!judge) return kExitEnvironment;
  std::unique_ptr<ax::builtin::BuiltinProposer> compiler;
  if (Status s = ax::builtin::MakeBuiltinCompiler(judge.get(), task, opts, &compiler); !s.ok()) {
    Fail(task.name + ": " + s.message());
    return s.code() == StatusCode::kInvalidInput ? kExitBadInput : kExitEnvironment;
  }
  if (!compiler->DeclineReason().empty()) {
    Fail(task.name + ": " + compiler->DeclineReason());
    return kExitProblems;
  }
  const bool explicit_plans = !given.empty();
  const std::vector<ax::builtin::Plan> plans = explicit_plans ? given : compiler->LargePlans();
  if (!f.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.out, ec);
    if (ec) {
      Fail("cannot create " + f.out + ": " + ec.message());
      return kExitBadInput;
    }
  }
  const bool to_stdout = f.out.empty() && explicit_plans && plans.size() == 1 && !f.json;
  std::string listing;
  int failed = 0;
  std::map<std::string, size_t> seen;  // source hash -> first plan with that source
  for (size_t i = 0; i < plans.size(); ++i) {
    std::string source;
    ax::builtin::Plan resolved;
    int kernels = 0;
    Status s = compiler->Render(plans[i], &source, &resolved, &kernels);
    json row = {{"index", i}, {"plan", s.ok() ? resolved.ToJson() : plans[i].ToJson()}};
    if (!s.ok() && to_stdout) {
      Fail(task.name + ": the plan does not generate: " + s.message());
      return kExitProblems;
    }
    if (!s.ok()) {
      ++failed;
      row["error"] = s.message();
    } else {
      row["kernels"] = kernels;
      row["launches"] = compiler->Launches(resolved);
      row["description"] = ax::builtin::DescribePlan(resolved);
      auto [it, fresh] = seen.emplace(Sha256Hex(source), i);
      if (!fresh) row["same_as"] = it->second;
      if (to_stdout) {
        std::cout << source;
        continue;
      }
      if (!f.out.empty()) {
        const std::string file = (std::filesystem::path(f.out) / ("plan_" + Index(i) + ".py")).string();
        if (!WriteFile(file, source)) {
          Fail("cannot write " + file);
          return kExitEnvironment;
        }
        row["file"] = file;
      }
    }
    listing += row.dump() + "\n";
    if (f.json) {
      std::cout << row.dump() << "\n";
    } else if (!s.ok()) {
      std::cout << Index(i) << "  not generated: " << s.message() << "\n";
    } else {
      std::cout << Index(i) << "  kernels " << kernels << "  launches " << row["launches"].get<int>() << "  "
                << row["description"].get<std::string>();
      if (row.contains("same_as")) std::cout << " (the source of " << Index(row["same_as"].get<size_t>()) << ")";
      std::cout << "\n";
    }
  }
  std::cout.flush();
  if (!f.out.empty() && !WriteFile((std::filesystem::path(f.out) / "plans.jsonl").string(), listing)) {
    Fail("cannot write plans.jsonl in " + f.out);
    return kExitEnvironment;
  }
  // Large-step plans that do not apply to this task are listed, not errors.
  return explicit_plans && failed ? kExitProblems : kExitOk;
}

}  // namespace ax::cli
