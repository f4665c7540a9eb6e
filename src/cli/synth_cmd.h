// `adaexplore synth`: synthesises KernelBench-format tasks for the adaptation
// stage into a folder, with an LLM or with the programmatic composer.
//
//   synth --out DIR --count N [--proposer P | --programmatic] [--seed S]
//         [--size small|medium|kernelbench] [--examples DIR] [--device D]
//         [--max-attempts M] [--min-ops A] [--max-ops B] [--max-output-mb X]
//         [--compile-timeout S] [--python PATH] [--max-memory-mb M]
//         [--record FILE] [--llm-max-tokens N] [--prompt FILE]
//
// Every task is validated by the judge's task loader and deduplicated; the
// rejected ones are listed with a reason in DIR/rejected.jsonl, the kept ones
// in DIR/tasks.jsonl. Exit 0 when N tasks were kept; 1 when the attempt
// budget ran out first; 2 for bad usage (one-line reason on stderr); 3 when
// the environment is broken (no Python with torch, the LLM refuses for good).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ax::cli {

struct SynthFlags {
  std::string out;
  int count = 0;
  std::string proposer;
  bool programmatic = false;
  long long seed = -1;        // -1: random (printed, so the run can be repeated)
  std::string device;         // empty: the first GPU if there is one, else cpu
  std::string size;           // empty: kernelbench on a GPU, small on the CPU
  std::string examples;       // empty: KernelBench level1 beside the repo, else examples/tasks
  int max_attempts = 0;       // 0: 5 * count
  int min_ops = 3, max_ops = 6;
  double max_output_mb = 512;
  double compile_timeout = 600;
  std::string python;
  long long max_memory_mb = 0;
  std::string record;
  int llm_max_tokens = 0;
  std::string prompt;
};

void RegisterSynthCommand(CLI::App& app, SynthFlags* f, CLI::App** sub);
int RunSynthCommand(const SynthFlags& f);

}  // namespace ax::cli
