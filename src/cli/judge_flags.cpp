#include "cli/judge_flags.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "broker/broker_url.h"
#include "broker/keys.h"
#include "broker/remote_judge.h"

namespace ax::cli {

void AddCommon(CLI::App* cmd, CommonFlags* f) {
  cmd->add_option("--device", f->device,
                  "cpu, cuda, cuda:N, a list cuda:0,cuda:1, or all (default: the first GPU if there is one, else cpu)");
  cmd->add_option("--python", f->python, "Python interpreter with torch and triton (default: ADAEXPLORE_PYTHON or the project's .venv)");
  cmd->add_option("--cache-dir", f->cache_dir, "verdict, baseline and build caches (default: ~/.cache/adaexplore)");
  cmd->add_flag("--no-cache", f->no_cache, "neither read nor write cached verdicts and baselines");
  cmd->add_option("--max-memory-mb", f->max_memory_mb, "host memory limit per worker process (default: half the RAM)");
  cmd->add_option("--judge", f->judge,
                  "judge through a broker: redis://[user:password@]HOST:PORT[/DB] (default: ADAEXPLORE_JUDGE; "
                  "none: a local pool)");
  cmd->add_option("--judge-model", f->judge_model,
                  "with --judge: the GPU model whose workers judge (e.g. nvidia-h200, cpu; default: any)");
  cmd->add_option("--broker-deadline", f->broker_deadline_s,
                  "with --judge: seconds the broker may stay unreachable before the run stops (default 120)");
}

void AddJudgeFlags(CLI::App* cmd, JudgeFlags* f, const char* seed_flag) {
  cmd->add_option("--tolerance", f->tolerance, "strict (default), kernelbench-v0.1 or adaexplore");
  cmd->add_option("--precision", f->precision,
                  "fp32 (default), fp16 or bf16: the task's model and floating inputs are cast to it on every side "
                  "(reference, candidate, baselines); the tolerance preset's value for that dtype applies");
  cmd->add_option("--timing", f->timing,
                  "host (default): a timed call runs on an idle GPU, its launch overhead included; gpu: each timed "
                  "call is queued behind a GPU spin that hides its launches, for the GPU time of its work (all sides alike)");
  cmd->add_option("--trials", f->trials, "correctness trials on fresh inputs (default 5)");
  cmd->add_option("--iters", f->iters, "timed calls (default 50 on GPU, 5 on CPU)");
  cmd->add_option("--warmup", f->warmup, "untimed warm-up calls (default 10 on GPU, 2 on CPU)");
  cmd->add_option("--baselines", f->baselines, "comma list of eager,compile or none (default: eager,compile on GPU, eager on CPU)");
  cmd->add_flag("--no-time", f->no_time, "check correctness only");
  cmd->add_option(seed_flag, f->seed, "fix the judge's input seeds (reproducible); random by default");
  cmd->add_option("--compile-timeout", f->compile_timeout, "seconds for import and builds, the first call's included (default 600)");
  cmd->add_option("--call-timeout", f->call_timeout,
                  "the least seconds the first call gets, its builds excluded: it gets max(this, 100x the reference's "
                  "call) (default 30)")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--run-timeout", f->run_timeout, "seconds for one trial or the timing phase (default 300)");
}

namespace {
Status Bad(const std::string& msg) { return Status::Error(StatusCode::kInvalidInput, msg); }
}  // namespace

Status ToOptions(CommonFlags* c, const JudgeFlags& f, JudgeOptions* o) {
  if (c->judge.empty()) {
    if (const char* env = getenv("ADAEXPLORE_JUDGE"); env && *env) c->judge = env;
  }
  if (c->judge_model.empty()) {
    if (const char* env = getenv("ADAEXPLORE_JUDGE_MODEL"); env && *env) c->judge_model = env;
  }
  if (c->remote()) {
    broker::BrokerUrl url;
    if (Status s = broker::ParseBrokerUrlFromEnv(c->judge, &url); !s.ok()) return s;
    const std::string& d = c->device;
    if (!d.empty() && d != "cpu" && d != "cuda" && d != "all") {
      return Bad("with --judge the workers choose their devices: --device may only be cpu, cuda or all "
                 "(--judge-model picks the GPU model)");
    }
    if (c->judge_model.empty()) c->judge_model = d == "cpu" ? "cpu" : broker::kAnyModel;
    if (!broker::SafeName(c->judge_model)) return Bad("bad --judge-model '" + c->judge_model + "'");
    if (c->broker_deadline_s <= 0) return Bad("--broker-deadline must be positive");
    o->device = c->judge_model == "cpu" ? "cpu" : "cuda";
  } else {
    if (!c->judge_model.empty() && !getenv("ADAEXPLORE_JUDGE_MODEL")) return Bad("--judge-model needs --judge");
    if (Status s = ParseDeviceSpec(c->device, VisibleGpuCount(), &c->devices); !s.ok()) return Bad(s.message());
    o->device = c->devices.request_device();
  }
  Tolerance tol;
  if (Status s = LookupTolerance(f.tolerance, &tol); !s.ok()) return Bad(s.message());
  if (f.trials < 1 || (f.iters != -1 && f.iters < 1)) return Bad("--trials and --iters must be at least 1");
  o->tolerance = f.tolerance;
  if (Status s = ParsePrecision(f.precision.empty() ? "fp32" : f.precision, &o->precision); !s.ok()) {
    return Bad(s.message());
  }
  if (Status s = ParseTimingMode(f.timing.empty() ? "host" : f.timing, &o->timing); !s.ok()) return Bad(s.message());
  if (o->timing == TimingMode::kGpu && !o->cuda()) return Bad("--timing gpu needs a CUDA device (the judge runs on cpu)");
  o->trials = f.trials;
  o->iters = f.iters;
  o->warmup = f.warmup;
  o->time = !f.no_time;
  o->compile_timeout_s = f.compile_timeout;
  o->run_timeout_s = f.run_timeout;
  o->call_timeout_s = f.call_timeout;
  o->use_cache = !c->no_cache;
  if (f.seed >= 0) o->seed = static_cast<unsigned long long>(f.seed);
  if (f.baselines == "none") {
    o->baselines = {"none"};
  } else if (!f.baselines.empty()) {
    std::stringstream ss(f.baselines);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item != "eager" && item != "compile") return Bad("bad --baselines item '" + item + "' (eager, compile or none)");
      o->baselines.push_back(item);
    }
  }
  return Status::Ok();
}

Status MakeJudge(const CommonFlags& c, int workers, int max_spawns, std::unique_ptr<Judge>* out) {
  if (c.remote()) {
    broker::RemoteConfig rc;
    if (Status s = broker::ParseBrokerUrlFromEnv(c.judge, &rc.url); !s.ok()) return s;
    rc.model = c.judge_model.empty() ? broker::kAnyModel : c.judge_model;
    rc.deadline_s = c.broker_deadline_s;
    return broker::MakeRemoteJudge(rc, out);
  }
  PoolConfig cfg = DefaultPoolConfig();
  if (!c.python.empty()) cfg.python = c.python;
  if (!c.cache_dir.empty()) cfg.cache_dir = std::filesystem::absolute(c.cache_dir).string();
  cfg.devices = c.devices.devices;
  cfg.workers_per_device = workers;
  cfg.max_spawns = max_spawns;
  if (c.max_memory_mb > 0) cfg.limits.max_memory_bytes = c.max_memory_mb << 20;
  *out = MakeJudgePool(cfg);
  return Status::Ok();
}

std::string JudgeWhere(const CommonFlags& c) {
  if (c.remote()) {
    broker::BrokerUrl url;
    if (broker::ParseBrokerUrlFromEnv(c.judge, &url).ok()) return url.Redacted();
    return "the broker";
  }
  std::string s;
  for (const auto& d : c.devices.devices) s += (s.empty() ? "" : ",") + d;
  return s;
}

}  // namespace ax::cli
