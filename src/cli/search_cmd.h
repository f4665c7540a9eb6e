// optimize, bench and adapt: the search over one or many tasks, through one
// judge and one LLM budget, recorded in a run folder (run.sqlite, best.py,
// summary.json). The command line and the Python bindings both run it.
#pragma once

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cli/judge_flags.h"
#include "judge/task.h"
#include "search/search.h"

namespace ax::cli {

struct SearchFlags {
  std::string proposer;
  int steps = 20;
  std::string method = "mcts";
  std::string memory;
  std::string out;
  bool resume = false;
  long long seed = -1;
  std::string record;
  std::string backend = "triton";
  long long max_tokens = 0;
  double max_dollars = 0;
  double max_wall_s = 0;
  std::string prices;
  int jobs = 1;
  int llm_max_tokens = 8192;
  // --hardware: the prompts' description of the device. "" (the default):
  // the judge's measured facts on a GPU (name, SMs, memory, copy bandwidth,
  // fp32 matmul rate), kept in the run's config so that --resume asks the
  // same prompts; on the CPU a fixed line about Triton's interpreter.
  std::string hardware;
  search::SearchParams params;
  std::string reward_mapping = "linear-clipped";
  int retime_top = 3;
  // --warm-start builtin|none ("" when not given: none, or the stored run's
  // on --resume) and --warm-start-steps (-1 when not given: a third of
  // --steps, or the stored run's on --resume).
  std::string warm_start;
  int warm_start_steps = -1;
};

// The search flags of optimize, bench and adapt (not --out or --jobs, whose
// help differs between them).
void AddSearchFlags(CLI::App* cmd, SearchFlags* f);

enum class SearchMode { kOptimize, kBench, kAdapt };

// How a caller watches and steers the run.
struct SearchHooks {
  // Every step's event; by default a line on stderr.
  search::ProgressFn progress;
  // The per-task result lines and pass@1 on stdout (the command line's).
  bool print_results = true;
};

// Runs the search; returns the exit code (cli_support.h) and fills *run with
// what summary.json holds (when the run got as far as writing it).
int RunSearch(const std::vector<TaskRef>& tasks, CommonFlags& c, const JudgeFlags& jf, SearchFlags& sf, SearchMode mode,
              const SearchHooks& hooks = {}, nlohmann::json* run = nullptr);

}  // namespace ax::cli
