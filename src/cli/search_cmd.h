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
  std::string hardware = "an NVIDIA H200 GPU (Hopper, sm_90, 132 SMs, 141 GB HBM3e at 4.8 TB/s)";
  search::SearchParams params;
  std::string reward_mapping = "linear-clipped";
  int retime_top = 3;
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
