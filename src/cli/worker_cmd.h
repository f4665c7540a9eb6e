// `adaexplore worker`: a long-lived judge service on a GPU host that serves
// jobs from a Redis Streams broker; and `adaexplore judge-status`: what the
// broker's workers and queues are doing (docs/distributed.md).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace ax::cli {

struct WorkerFlags {
  std::string broker;
  std::string device = "all";
  std::string name;
  int jobs = 2;
  double lease_s = 30;
  std::string python, cache_dir;
  long long max_memory_mb = 0;
  bool json = false;  // judge-status
};

void RegisterWorkerCommands(CLI::App& app, WorkerFlags* f, CLI::App** worker, CLI::App** status);
int RunWorkerCommand(const WorkerFlags& f);
int RunJudgeStatusCommand(const WorkerFlags& f);

}  // namespace ax::cli
