// adaexplore: turns slow PyTorch operators into fast, verified GPU kernels.
//
// Exit codes: 0 a verdict (or listing) was produced, whatever it says;
// 1 a command ran but found problems (e.g. invalid tasks in `tasks`);
// 2 bad usage or unreadable input; 3 the judge's environment is broken
// (no Python with torch, no GPU where one was asked for).
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "common/util.h"
#include "judge/judge.h"

namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitEnvironment = 3;

std::string DefaultDevice() {
  std::error_code ec;
  if (std::filesystem::exists("/dev/nvidia0", ec)) return "cuda:0";
  return "cpu";
}

bool ValidDevice(const std::string& d) {
  if (d == "cpu" || d == "cuda") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5) return false;
  for (size_t i = 5; i < d.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(d[i]))) return false;
  }
  return true;
}

struct CommonFlags {
  std::string device;
  std::string python;
  std::string cache_dir;
  bool no_cache = false;
};

void AddCommon(CLI::App* cmd, CommonFlags* f) {
  cmd->add_option("--device", f->device, "cpu, cuda or cuda:N (default: the first GPU if there is one, else cpu)");
  cmd->add_option("--python", f->python, "Python interpreter with torch and triton (default: ADAEXPLORE_PYTHON or the project's .venv)");
  cmd->add_option("--cache-dir", f->cache_dir, "verdict, baseline and build caches (default: ~/.cache/adaexplore)");
  cmd->add_flag("--no-cache", f->no_cache, "neither read nor write cached verdicts and baselines");
}

ax::PoolConfig PoolFor(const CommonFlags& f, const std::string& device, int workers) {
  ax::PoolConfig cfg = ax::DefaultPoolConfig();
  if (!f.python.empty()) cfg.python = f.python;
  if (!f.cache_dir.empty()) cfg.cache_dir = std::filesystem::absolute(f.cache_dir).string();
  cfg.devices = {device};
  cfg.workers_per_device = workers;
  return cfg;
}

void Fail(const std::string& msg) { std::fprintf(stderr, "adaexplore: %s\n", msg.c_str()); }

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{"adaexplore: fast, verified GPU kernels for PyTorch operators"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "adaexplore 0.1.0");

  // ---- eval ----
  CLI::App* eval = app.add_subcommand("eval", "judge one candidate kernel against a KernelBench task");
  CommonFlags ef;
  std::string task_spec, cand_path, tolerance = "strict", baselines;
  int trials = 5, iters = -1, warmup = -1;
  bool as_json = false, no_time = false;
  double compile_timeout = 600, run_timeout = 300;
  long long seed = -1;
  eval->add_option("TASK", task_spec, "task file, KernelBench levelN/ID, or kernelbench:ROOT:LEVEL:ID")->required();
  eval->add_option("CANDIDATE", cand_path, "candidate file defining ModelNew")->required();
  AddCommon(eval, &ef);
  eval->add_option("--tolerance", tolerance, "strict (default), kernelbench-v0.1 or adaexplore");
  eval->add_option("--trials", trials, "correctness trials on fresh inputs (default 5)");
  eval->add_option("--iters", iters, "timed calls (default 50 on GPU, 5 on CPU)");
  eval->add_option("--warmup", warmup, "untimed warm-up calls (default 10 on GPU, 2 on CPU)");
  eval->add_option("--baselines", baselines, "comma list of eager,compile or none (default: eager,compile on GPU, eager on CPU)");
  eval->add_flag("--no-time", no_time, "check correctness only");
  eval->add_option("--seed", seed, "fix the input seeds (reproducible); random by default");
  eval->add_option("--compile-timeout", compile_timeout, "seconds for import, build and first call (default 600)");
  eval->add_option("--run-timeout", run_timeout, "seconds for one trial or the timing phase (default 300)");
  eval->add_flag("--json", as_json, "print one JSON object (the last line)");

  // ---- tasks ----
  CLI::App* tasks = app.add_subcommand("tasks", "load and validate tasks: builds, runs, output, degenerate");
  CommonFlags tf;
  std::string tasks_spec, tasks_tol = "strict";
  bool tasks_json = false;
  tasks->add_option("SPEC", tasks_spec, "task file, folder, levelN/ID or kernelbench:ROOT:LEVEL:ID")->required();
  AddCommon(tasks, &tf);
  tasks->add_option("--tolerance", tasks_tol, "tolerance used for the all-zero degeneracy check");
  tasks->add_flag("--json", tasks_json, "one JSON object per task");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }

  if (*eval) {
    if (ef.device.empty()) ef.device = DefaultDevice();
    if (ef.device == "cuda") ef.device = "cuda:0";
    if (!ValidDevice(ef.device)) {
      Fail("bad --device '" + ef.device + "' (cpu, cuda or cuda:N)");
      return kExitBadInput;
    }
    ax::Tolerance tol;
    if (ax::Status s = ax::LookupTolerance(tolerance, &tol); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    if (trials < 1 || (iters != -1 && iters < 1)) {
      Fail("--trials and --iters must be at least 1");
      return kExitBadInput;
    }
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(task_spec, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    if (found.size() != 1) {
      Fail("eval takes one task; " + task_spec + " names " + std::to_string(found.size()));
      return kExitBadInput;
    }
    auto source = ax::ReadFile(cand_path);
    if (!source) {
      Fail("cannot read candidate file: " + cand_path);
      return kExitBadInput;
    }
    ax::EvalRequest req;
    req.task = found[0];
    req.candidate_path = std::filesystem::absolute(cand_path).string();
    req.candidate_source = *source;
    ax::JudgeOptions& o = req.options;
    o.device = ef.device;
    o.tolerance = tolerance;
    o.trials = trials;
    o.iters = iters;
    o.warmup = warmup;
    o.time = !no_time;
    o.compile_timeout_s = compile_timeout;
    o.run_timeout_s = run_timeout;
    o.use_cache = !ef.no_cache;
    if (seed >= 0) o.seed = static_cast<unsigned long long>(seed);
    if (baselines == "none") {
      o.baselines = {"none"};
    } else if (!baselines.empty()) {
      std::stringstream ss(baselines);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (item != "eager" && item != "compile") {
          Fail("bad --baselines item '" + item + "' (eager, compile or none)");
          return kExitBadInput;
        }
        o.baselines.push_back(item);
      }
    }
    auto pool = ax::MakeJudgePool(PoolFor(ef, ef.device, 1));
    ax::EvalResult r = pool->Evaluate(req);
    if (!r.status.ok()) {
      Fail(r.status.message());
      return r.bad_input ? kExitBadInput : kExitEnvironment;
    }
    if (as_json) {
      std::cout << r.verdict.ToJson().dump() << std::endl;
    } else {
      std::cout << r.verdict.ToText();
    }
    return 0;
  }

  if (*tasks) {
    if (tf.device.empty()) tf.device = DefaultDevice();
    if (tf.device == "cuda") tf.device = "cuda:0";
    if (!ValidDevice(tf.device)) {
      Fail("bad --device '" + tf.device + "' (cpu, cuda or cuda:N)");
      return kExitBadInput;
    }
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(tasks_spec, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    auto pool = ax::MakeJudgePool(PoolFor(tf, tf.device, 1));
    ax::JudgeOptions o;
    o.device = tf.device;
    o.tolerance = tasks_tol;
    int invalid = 0;
    for (const auto& t : found) {
      ax::TaskInfo info;
      ax::Status s = pool->CheckTask(t, o, &info);
      if (!s.ok() && info.error.empty()) {
        Fail(s.message());
        return kExitEnvironment;
      }
      if (!info.ok) ++invalid;
      nlohmann::json j = {{"task", t.name}, {"path", t.path}, {"hash", t.hash}, {"ok", info.ok}};
      if (info.ok) {
        j["outputs"] = nlohmann::json::parse(info.outputs_json);
        j["degenerate"] = info.degenerate;
      } else {
        j["error"] = info.error;
      }
      if (tasks_json) {
        std::cout << j.dump() << std::endl;
      } else if (info.ok) {
        std::string deg;
        for (auto& d : info.degenerate) deg += (deg.empty() ? "  DEGENERATE: " : ", ") + d;
        std::cout << t.name << "  " << t.hash.substr(0, 12) << "  " << j["outputs"].dump() << deg << std::endl;
      } else {
        std::cout << t.name << "  INVALID: " << info.error << std::endl;
      }
    }
    return invalid ? 1 : 0;
  }
  return 0;
}
