// The flags every judging subcommand shares (eval, batch, tasks, optimize,
// bench, adapt): where candidates run (--device, or --judge with a broker),
// the worker environment, and the judging protocol; and the Judge they make:
// a local pool over the named devices or a RemoteJudge over Redis Streams.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"
#include "judge/device_spec.h"
#include "judge/judge.h"

namespace ax::cli {

struct CommonFlags {
  std::string device;
  std::string python;
  std::string cache_dir;
  bool no_cache = false;
  long long max_memory_mb = 0;
  std::string judge;        // redis://... (or ADAEXPLORE_JUDGE): judge through a broker
  std::string judge_model;  // the broker's job stream: a GPU model slug, cpu or any
  double broker_deadline_s = 120;
  DeviceSpec devices;       // filled by ToOptions (local pool only)
  bool remote() const { return !judge.empty(); }
};

void AddCommon(CLI::App* cmd, CommonFlags* f);

// Flags that set the judging protocol.
struct JudgeFlags {
  std::string tolerance = "strict", baselines;
  std::string precision;  // empty: fp32 (or, on --resume, the stored run's)
  std::string timing;     // empty: host (or, on --resume, the stored run's)
  int trials = 5, iters = -1, warmup = -1;
  bool no_time = false;
  double compile_timeout = 600, run_timeout = 300, call_timeout = 30;
  long long seed = -1;
};

void AddJudgeFlags(CLI::App* cmd, JudgeFlags* f, const char* seed_flag = "--seed");

// Checks the flags and fills the options; kInvalidInput (one line) on bad usage.
Status ToOptions(CommonFlags* c, const JudgeFlags& f, JudgeOptions* o);

// The judge the flags name (after ToOptions): `workers` candidates in flight
// per device, at most `max_spawns` candidate workers (-1: no limit). A broker
// that cannot be reached or refuses the login is an error here.
Status MakeJudge(const CommonFlags& c, int workers, int max_spawns, std::unique_ptr<Judge>* out);

// Where the judge runs, for messages: "cuda:0,cuda:1" or the redacted broker URL.
std::string JudgeWhere(const CommonFlags& c);

// One line to stderr as "adaexplore: MESSAGE" (or to the sink that
// SetFailSink in cli_support.h installed).
void Fail(const std::string& msg);

}  // namespace ax::cli
