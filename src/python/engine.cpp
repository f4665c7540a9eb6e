// adaexplore._engine: the entry points of the Python package. Each one parses
// the same flags as the command line (python/adaexplore turns keyword
// arguments into them) and runs the same code: ax::cli::Main for the
// `adaexplore` command, EvaluateOne for evaluate(), RunSearch for optimize(),
// the report library for report(). The GIL is released while they run; a
// one-line failure comes back as {"code": N, "errors": [...]}, which the
// Python side turns into an exception.
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/cli_support.h"
#include "cli/eval_cmd.h"
#include "cli/interrupt.h"
#include "cli/judge_flags.h"
#include "cli/search_cmd.h"
#include "common/install_paths.h"
#include "python/py_json.h"
#include "report/report.h"
#include "report/run_data.h"

namespace nb = nanobind;
using nlohmann::json;

namespace {

// One call of the engine at a time in a process: the failure sink and the
// interrupt handlers are process-wide.
std::mutex g_call_mu;

// Collects Fail() messages for the duration of one call.
class FailCapture {
 public:
  FailCapture() {
    ax::cli::SetFailSink([this](const std::string& m) { errors_.push_back(m); });
  }
  ~FailCapture() { ax::cli::SetFailSink(nullptr); }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

// Parses flags (the command line's, as a list) into the app's options; on
// bad usage, the code and CLI11's one-line reason.
json Parse(CLI::App& app, std::vector<std::string> flags) {
  std::reverse(flags.begin(), flags.end());  // CLI11 takes a reversed vector
  try {
    app.parse(flags);
  } catch (const CLI::ParseError& e) {
    return {{"code", ax::cli::kExitBadInput}, {"errors", {std::string(e.what())}}};
  }
  return nullptr;
}

json Errors(int code, const FailCapture& cap) { return {{"code", code}, {"errors", cap.errors()}}; }

int RunMain(std::vector<std::string> argv) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g_call_mu);
  return ax::cli::Main(static_cast<int>(argv.size()), args.data());
}

nb::object Evaluate(const std::string& task, const std::string& candidate, const std::vector<std::string>& flags) {
  json out;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(g_call_mu);
    CLI::App app{"evaluate"};
    ax::cli::CommonFlags c;
    ax::cli::JudgeFlags f;
    ax::cli::AddCommon(&app, &c);
    ax::cli::AddJudgeFlags(&app, &f);
    out = Parse(app, flags);
    if (out.is_null()) {
      FailCapture cap;
      ax::Verdict v;
      int code = ax::cli::EvaluateOne(task, candidate, c, f, &v);
      out = code == ax::cli::kExitOk ? json{{"code", 0}, {"verdict", v.ToJson()}} : Errors(code, cap);
    }
  }
  return ax::py::ToPython(out);
}

nb::object Optimize(const std::vector<std::string>& tasks_spec, bool bench, const std::vector<std::string>& flags,
                    nb::object progress) {
  json out;
  nb::object callback_error = nb::none();
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(g_call_mu);
    CLI::App app{"optimize"};
    ax::cli::CommonFlags c;
    ax::cli::JudgeFlags jf;
    ax::cli::SearchFlags sf;
    ax::cli::AddCommon(&app, &c);
    ax::cli::AddJudgeFlags(&app, &jf, "--judge-seed");
    ax::cli::AddSearchFlags(&app, &sf);
    app.add_option("--out", sf.out);
    app.add_option("--jobs", sf.jobs);
    out = Parse(app, flags);
    if (out.is_null()) {
      FailCapture cap;
      std::vector<ax::TaskRef> tasks;
      int code = ax::cli::kExitOk;
      for (const auto& spec : tasks_spec) {
        std::vector<ax::TaskRef> found;
        if (ax::Status s = ax::ResolveTasks(spec, &found); !s.ok()) {
          ax::cli::Fail(s.message());
          code = ax::cli::kExitBadInput;
          break;
        }
        tasks.insert(tasks.end(), found.begin(), found.end());
      }
      if (code == ax::cli::kExitOk && !bench && tasks.size() != 1) {
        ax::cli::Fail("expected one task; got " + std::to_string(tasks.size()));
        code = ax::cli::kExitBadInput;
      }
      json run;
      if (code == ax::cli::kExitOk) {
        ax::cli::SearchHooks hooks;
        hooks.print_results = false;
        if (!progress.is_none()) {
          hooks.progress = [&](const ax::search::Progress& p) {
            nb::gil_scoped_acquire acquire;
            if (!callback_error.is_none()) return;
            try {
              nb::dict ev;
              ev["task"] = p.task;
              ev["line"] = p.line;
              ev["step"] = p.step;
              ev["steps"] = p.steps;
              ev["best_speedup"] = p.best_speedup ? nb::object(nb::float_(*p.best_speedup)) : nb::none();
              progress(ev);
            } catch (nb::python_error& e) {
              // The callback failed (or raised KeyboardInterrupt): the run
              // stops as after Ctrl-C, and the error is raised once it is saved.
              callback_error = nb::borrow(e.value());
              ax::cli::RequestInterrupt();
            }
          };
        }
        code = ax::cli::RunSearch(tasks, c, jf, sf, bench ? ax::cli::SearchMode::kBench : ax::cli::SearchMode::kOptimize,
                                  hooks, &run);
      }
      out = Errors(code, cap);
      out["run"] = run;
    }
  }
  nb::object result = ax::py::ToPython(out);
  if (!callback_error.is_none()) nb::cast<nb::dict>(result)["callback_error"] = callback_error;
  return result;
}

nb::object Report(const std::string& run_dir) {
  json out;
  {
    nb::gil_scoped_release release;
    ax::report::RunData data;
    if (ax::Status s = ax::report::LoadRun(run_dir, &data); !s.ok()) {
      out = {{"code", ax::cli::kExitBadInput}, {"errors", {s.message()}}};
    } else {
      out = {{"code", 0}, {"report", ax::report::ReportJson(ax::report::MakeReport(std::move(data)))}};
    }
  }
  return ax::py::ToPython(out);
}

nb::object TaskInfo(const std::string& spec) {
  std::vector<ax::TaskRef> found;
  if (ax::Status s = ax::ResolveTasks(spec, &found); !s.ok()) {
    return ax::py::ToPython({{"code", ax::cli::kExitBadInput}, {"errors", {s.message()}}});
  }
  json tasks = json::array();
  for (const auto& t : found) tasks.push_back({{"name", t.name}, {"path", t.path}, {"hash", t.hash}});
  return ax::py::ToPython({{"code", 0}, {"tasks", tasks}});
}

}  // namespace

NB_MODULE(_engine, m) {
  m.doc() = "The adaexplore C++ engine (use the adaexplore package, not this module).";
  m.attr("__version__") = ADAEXPLORE_VERSION;
  m.def("main", &RunMain, nb::arg("argv"), "The adaexplore command line; returns its exit code.");
  m.def("evaluate", &Evaluate, nb::arg("task"), nb::arg("candidate"), nb::arg("flags"));
  m.def("optimize", &Optimize, nb::arg("tasks"), nb::arg("bench"), nb::arg("flags"), nb::arg("progress").none());
  m.def("report", &Report, nb::arg("run_dir"));
  m.def("task_info", &TaskInfo, nb::arg("spec"));
  m.def("resource_dirs", [] {
    nb::dict d;
    d["prompts"] = ax::PromptsDir();
    d["worker"] = ax::WorkerDir();
    d["code"] = ax::CodeDir();
    return d;
  });
}
