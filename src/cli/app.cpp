#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <signal.h>

#include <string>
#include <vector>

#include "cli/cli_support.h"
#include "cli/compile_cmd.h"
#include "cli/eval_cmd.h"
#include "cli/judge_flags.h"
#include "cli/memory_cmd.h"
#include "cli/report_cmd.h"
#include "cli/search_cmd.h"
#include "cli/synth_cmd.h"
#include "cli/worker_cmd.h"
#include "common/install_paths.h"

#ifndef ADAEXPLORE_VERSION
#define ADAEXPLORE_VERSION "0.0.0"
#endif

namespace ax::cli {

int Main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{"adaexplore: fast, verified GPU kernels for PyTorch operators"};
  app.require_subcommand(1);
  // The version, and where this binary finds its prompts and worker package.
  app.set_version_flag("--version", [] {
    return std::string("adaexplore " ADAEXPLORE_VERSION "\nprompts: ") + ax::PromptsDir() + "\nworker: " + ax::WorkerDir();
  });

  // ---- eval ----
  CLI::App* eval = app.add_subcommand("eval", "judge one candidate kernel against a KernelBench task");
  CommonFlags ef;
  JudgeFlags ej;
  std::string task_spec, cand_path;
  bool as_json = false;
  eval->add_option("TASK", task_spec, "task file, KernelBench levelN/ID, or kernelbench:ROOT:LEVEL:ID")->required();
  eval->add_option("CANDIDATE", cand_path, "candidate file defining ModelNew")->required();
  ax::cli::AddCommon(eval, &ef);
  ax::cli::AddJudgeFlags(eval, &ej);
  eval->add_flag("--json", as_json, "print one JSON object (the last line)");

  // ---- batch ----
  CLI::App* batch = app.add_subcommand("batch", "judge many candidates through one judge pool");
  CommonFlags bf;
  JudgeFlags bj;
  std::string manifest;
  int jobs = 2;
  batch->add_option("MANIFEST", manifest, "JSON lines: {\"task\": SPEC, \"candidate\": FILE} (paths relative to the manifest)")
      ->required();
  ax::cli::AddCommon(batch, &bf);
  ax::cli::AddJudgeFlags(batch, &bj);
  batch->add_option("--jobs", jobs, "candidates in flight per device (default 2)");

  // ---- optimize ----
  CLI::App* optimize = app.add_subcommand("optimize", "search for the fastest correct kernel of one task");
  CommonFlags of;
  JudgeFlags oj;
  SearchFlags os;
  std::string opt_task;
  optimize->add_option("TASK", opt_task, "task file, KernelBench levelN/ID, or kernelbench:ROOT:LEVEL:ID")->required();
  ax::cli::AddCommon(optimize, &of);
  ax::cli::AddJudgeFlags(optimize, &oj, "--judge-seed");
  AddSearchFlags(optimize, &os);
  optimize->add_option("--out", os.out, "run folder (default runs/TASK-TIMESTAMP): best.py, run.sqlite, summary.json");

  // ---- bench ----
  CLI::App* benchc = app.add_subcommand("bench", "optimize many tasks, sharing one judge pool and one LLM budget");
  CommonFlags bnf;
  JudgeFlags bnj;
  SearchFlags bns;
  std::string bench_spec;
  benchc->add_option("TASKS", bench_spec, "task folder, file, levelN/ID or kernelbench:ROOT:LEVEL:ID")->required();
  ax::cli::AddCommon(benchc, &bnf);
  ax::cli::AddJudgeFlags(benchc, &bnj, "--judge-seed");
  AddSearchFlags(benchc, &bns);
  benchc->add_option("--out", bns.out, "run folder: one sub-folder per task, run.sqlite, summary.json")->required();
  benchc->add_option("--jobs", bns.jobs, "tasks searched in parallel (default 1)");

  // ---- adapt ----
  CLI::App* adaptc = app.add_subcommand("adapt", "run the agent over (synthesised) tasks and learn rules from its failures");
  CommonFlags adf;
  JudgeFlags adj;
  SearchFlags ads;
  std::string adapt_tasks;
  adaptc->add_option("--tasks", adapt_tasks, "task folder (e.g. from adaexplore synth)")->required();
  ax::cli::AddCommon(adaptc, &adf);
  ax::cli::AddJudgeFlags(adaptc, &adj, "--judge-seed");
  AddSearchFlags(adaptc, &ads);
  adaptc->get_option("--memory")->required()->description("the memory to learn into (.txt: rule||score, .json: with examples); created if missing");
  adaptc->add_option("--out", ads.out, "run folder (default runs/adapt-TIMESTAMP)");
  adaptc->add_option("--jobs", ads.jobs, "tasks in parallel (default 1)");

  // ---- tasks ----
  CLI::App* tasks = app.add_subcommand("tasks", "load and validate tasks: builds, runs, output, degenerate");
  CommonFlags tf;
  std::string tasks_spec, tasks_tol = "strict";
  bool tasks_json = false;
  tasks->add_option("SPEC", tasks_spec, "task file, folder, levelN/ID or kernelbench:ROOT:LEVEL:ID")->required();
  ax::cli::AddCommon(tasks, &tf);
  tasks->add_option("--tolerance", tasks_tol, "tolerance used for the all-zero degeneracy check");
  tasks->add_flag("--json", tasks_json, "one JSON object per task");

  ax::cli::CompileFlags compile_flags;
  CLI::App* compile_cmd = nullptr;
  ax::cli::RegisterCompileCommand(app, &compile_flags, &compile_cmd);
  ax::cli::ReportFlags report_flags;
  CLI::App* report_cmd = nullptr;
  ax::cli::RegisterReportCommand(app, &report_flags, &report_cmd);
  ax::cli::MemoryFlags memory_flags;
  CLI::App* memory_cmd = nullptr;
  ax::cli::RegisterMemoryCommand(app, &memory_flags, &memory_cmd);
  ax::cli::SynthFlags synth_flags;
  CLI::App* synth_cmd = nullptr;
  ax::cli::RegisterSynthCommand(app, &synth_flags, &synth_cmd);
  ax::cli::WorkerFlags worker_flags;
  CLI::App* worker_cmd = nullptr;
  CLI::App* status_cmd = nullptr;
  ax::cli::RegisterWorkerCommands(app, &worker_flags, &worker_cmd, &status_cmd);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }

  if (*compile_cmd) return ax::cli::RunCompileCommand(compile_flags);
  if (*report_cmd) return ax::cli::RunReportCommand(report_flags);
  if (*memory_cmd) return ax::cli::RunMemoryCommand(memory_flags);
  if (*synth_cmd) return ax::cli::RunSynthCommand(synth_flags);
  if (*worker_cmd) return ax::cli::RunWorkerCommand(worker_flags);
  if (*status_cmd) return ax::cli::RunJudgeStatusCommand(worker_flags);

  if (*eval) return RunEval(task_spec, cand_path, ef, ej, as_json);

  if (*batch) return RunBatch(manifest, bf, bj, jobs);

  if (*optimize) {
    ax::TaskRef t;
    if (!OneTask(opt_task, &t)) return kExitBadInput;
    return RunSearch({t}, of, oj, os, SearchMode::kOptimize);
  }

  if (*adaptc) {
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(adapt_tasks, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    if (ads.memory == "none") {
      Fail("adapt needs a --memory file to learn into");
      return kExitBadInput;
    }
    if (ads.out.empty()) ads.out = "runs/adapt-" + Timestamp();
    return RunSearch(found, adf, adj, ads, SearchMode::kAdapt);
  }

  if (*benchc) {
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(bench_spec, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    return RunSearch(found, bnf, bnj, bns, SearchMode::kBench);
  }

  if (*tasks) return RunTasks(tasks_spec, tf, tasks_tol, tasks_json);
  return 0;
}

}  // namespace ax::cli
