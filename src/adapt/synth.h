// Task synthesis: fills a folder with new KernelBench-format tasks for the
// adaptation stage, either from an LLM (few-shot from KernelBench problems,
// with operators drawn from the catalogue) or from the programmatic composer.
//
// Every candidate goes through the same gate before it is written: plain
// PyTorch, not a duplicate of a task already there (normalised source, then
// operator signature), and accepted by the judge's task loader on the chosen
// device (builds, runs, returns tensors, not degenerate, within the compile
// timeout and the output-size limit). A rejected candidate is not written as
// a task; it gets a line in DIR/rejected.jsonl saying why. Kept tasks are
// listed in DIR/tasks.jsonl (file, signature, outputs, origin), which a later
// run into the same folder reads so that it only adds new tasks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "adapt/composer.h"
#include "common/status.h"
#include "judge/judge.h"
#include "llm/client.h"

namespace ax::adapt {

struct SynthOptions {
  std::string out_dir;
  int count = 10;                       // tasks to keep
  int max_attempts = 0;                 // candidates to try in all; 0: 5 * count
  uint64_t seed = 0;
  SizeScale scale = SizeScale::kSmall;
  int min_ops = 3, max_ops = 6;
  long long max_output_bytes = 512LL << 20;
  JudgeOptions judge;                   // device, tolerance (for degeneracy), compile timeout

  // The LLM path (llm set); the composer otherwise.
  llm::LlmClient* llm = nullptr;
  std::string examples_dir;             // few-shot examples; empty: DefaultExamplesDir()
  int examples = 3;                     // examples shown per prompt (2 or 3 is plenty)
  std::string prompt_file;              // empty: synth.txt in the prompts folder
  int llm_max_tokens = 0;               // 0: the client's default

  std::function<void(const std::string&)> progress;  // one line per attempt; may be null
};

enum class SynthFailure {
  kNone,
  kUsage,        // bad options, unreadable examples or template
  kEnvironment,  // the judge cannot run a trivial task (no Python with torch...)
  kLlm,          // the LLM refused for good (key, quota, budget, model, recording exhausted)
  kIo,           // the output folder cannot be written
};

struct SynthResult {
  Status status;                       // not ok: stopped before the budget was spent (see failure)
  SynthFailure failure = SynthFailure::kNone;
  int kept = 0, attempts = 0, rejected = 0;
  std::vector<std::string> files;      // tasks written by this run, in order
  std::map<std::string, int> rejections;  // stage -> count
  std::string Summary(const SynthOptions& o) const;  // one line
};

// Rejection stages, as rejected.jsonl spells them.
//   llm                 the LLM call failed (transient: timeout, truncated, ...)
//   extract             the reply holds no KernelBench task
//   not_plain_pytorch   the task uses Triton, CUDA extensions or defines ModelNew
//   duplicate_source    same normalised source as an existing task
//   duplicate_signature same operator signature as an existing task
//   invalid             the judge's task loader refused it (import, build, forward, timeout)
//   degenerate          output independent of the input, or all-zero output passes
//   too_large           the output exceeds max_output_bytes
//   compose             the composer found no chain

SynthResult Synthesize(const SynthOptions& o, Judge* judge);

// ../shared/datasets/kernelbench/level1 beside the source tree when it exists,
// else the bundled examples/tasks.
std::string DefaultExamplesDir();

// A file-name-safe task name from operator kinds: "Conv2d_GroupNorm_GELU"
// (annotations dropped, at most 6 kinds).
std::string TaskNameFromOps(const std::vector<std::string>& ops);

}  // namespace ax::adapt
