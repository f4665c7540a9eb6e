// RunData: everything a report shows about one run folder (the --out of
// `adaexplore optimize` or `bench`), read once from its run.sqlite, as plain
// data. LoadRun reads it (read-only; the run may still be going); ToOutcomes
// turns it into what the metrics need.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "report/metrics.h"

namespace ax::report {

// One LLM call, as recorded (src/llm/recorder.cpp).
struct CallInfo {
  int seq = 0;
  std::string purpose;            // propose, revise, tune, tune-retry
  std::string model;
  std::string system, prompt;     // the request's system text and user message(s)
  std::string reply;
  bool ok = true;
  std::string error;
  int64_t input_tokens = 0, output_tokens = 0;
  double cost_usd = 0, latency_s = 0;
};

// One node of a task's search tree, with its verdict when one was recorded.
struct NodeInfo {
  int id = 0, parent = -1;
  std::string kind;               // root, large, small
  bool warm_start = false;        // made by the warm start (--warm-start builtin)
  std::string status;             // the judge's status, or duplicate / no_candidate
  bool correct = false;
  std::optional<double> speedup_eager, speedup_compile;
  std::optional<double> runtime_ms;
  std::string error, note, source, hash;
  std::vector<std::string> flags;
  int visits = 0;
  double reward = 0;
  nlohmann::json verdict;         // the stored verdict (null when none)
  // The LLM calls that made this node (indices into TaskData::calls): the
  // calls of its step, found by segmenting the task's calls in store order at
  // each "propose" or "revise" call (a step starts with one of those).
  std::vector<int> calls;
};

struct TaskData {
  std::string name;
  std::string path;               // the task file, as the run's config recorded it
  // found, none, stopped: ...; "incomplete" when the task has no summary yet
  // (killed or still running); "not started" when it has no tree either.
  std::string status;
  bool has_summary = false;
  int steps = 0, judged = 0, llm_calls = 0;
  int best_node = -1;
  // The best kernel's figures: from the summary's re-timed verdict, or, for
  // an incomplete task, from the fastest correct node judged so far.
  std::optional<double> speedup_eager, speedup_compile, runtime_ms;
  std::optional<double> baseline_eager_ms, baseline_compile_ms;
  std::vector<std::string> flags;
  bool degenerate = false;
  std::string device;
  // From the summary: steps taken by the warm start (--warm-start), and where
  // the best kernel came from ("builtin", "llm"; "" when unknown), and whether
  // it is an LLM refinement of a warm-start kernel.
  int warm_start_steps = 0;
  std::string best_origin;
  bool best_refines_warm_start = false;
  std::string best_source;        // best.py as written, or the best node's source
  std::string best_file;          // path of best.py when it exists ("" otherwise)
  std::vector<NodeInfo> nodes;    // id order = step order; nodes[0] the root
  std::vector<CallInfo> calls;    // seq order
  Cost cost;
  std::map<std::string, Cost> cost_by_purpose;
};

struct RunData {
  std::string dir;                // as given
  nlohmann::json config;          // meta 'config' (object; empty when missing)
  std::vector<TaskData> tasks;    // in the order of the config, then any others by name
};

// Reads a run folder. Fails (one line) when the folder or its run.sqlite is
// missing, unreadable or not a run store.
Status LoadRun(const std::string& dir, RunData* out);

const NodeInfo* FindNode(const TaskData& t, int id);  // nullptr when absent
TaskOutcome ToOutcome(const TaskData& t);
std::vector<TaskOutcome> ToOutcomes(const RunData& run);

}  // namespace ax::report
