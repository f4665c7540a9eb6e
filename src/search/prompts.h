// Prompts: the proposer, reviser and tuner prompts, rendered from template
// files shipped in prompts/ (ADAEXPLORE_PROMPTS_DIR overrides the folder).
//
// Templates use {{name}} for a value, {{#name}}...{{/name}} for a section
// shown when the value is non-empty and {{^name}}...{{/name}} for one shown
// when it is empty. Unknown names are an error, so a typo cannot silently
// drop part of a prompt.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace ax::search {

Status RenderTemplate(const std::string& tmpl, const std::map<std::string, std::string>& values, std::string* out);

// One earlier candidate as the prompts show it.
struct ShownKernel {
  std::string source;
  std::string verdict;   // one line: "correct, 1.42x faster than eager (0.12 ms)" or "mismatch: ..."
  std::string note;      // guidance or edit feedback that produced it, if any
  // The GPU profile in one line, when it was profiled: "2 kernels; `k` 71% of
  // 1.84 ms; 38% of copy bandwidth (memory-bound)".
  std::string profile;
};

struct PromptInputs {
  std::string task_source;
  std::string backend = "triton";      // "triton" or "cuda"
  std::string tolerance = "strict";
  double fp32_tol = 1e-4;
  // Judged in fp16 or bf16 ("fp16", "bf16"; empty: fp32): the prompt says so,
  // with that dtype's tolerance (half_tol).
  std::string half_precision;
  double half_tol = 1e-2;
  std::string hardware = "an NVIDIA GPU";
  std::vector<std::string> rules;      // skill-memory rules, best first
  std::vector<ShownKernel> pool;       // large step: the diverse pool
  std::vector<ShownKernel> path;       // small step: the recent path, oldest first
  ShownKernel parent;                  // small step: the kernel to edit
  std::string guidance;                // small step: the reviser's guidance
  std::string feedback;                // small step: why the previous edits failed
};

struct RenderedPrompt {
  std::string system, user;
};

class Prompts {
 public:
  // Loads every template from `dir` (empty: the default folder).
  static Status Load(const std::string& dir, Prompts* out);
  static std::string DefaultDir();

  Status Proposer(const PromptInputs& in, RenderedPrompt* out) const;
  Status Reviser(const PromptInputs& in, RenderedPrompt* out) const;
  Status Tuner(const PromptInputs& in, RenderedPrompt* out) const;

 private:
  Status Common(const PromptInputs& in, std::map<std::string, std::string>* v, std::string* system) const;
  std::map<std::string, std::string> files_;
};

}  // namespace ax::search
