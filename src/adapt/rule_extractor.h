// RuleExtractor: turns one failed candidate (its source, the judge's status
// and error text) into at most one short validity rule, "You cannot ...",
// naming the smallest forbidden action, with one LLM call
// (prompts/rule_extractor.txt). The LLM may answer "no guidance".
//
// Only the candidate's own mistakes become rules: compile_error and
// runtime_error verdicts (mismatch when asked for). Infrastructure failures
// never do: timeouts and crashes (load, the judge's environment), errors that
// name the judge itself (its worker, the reference, scratch space, the
// network, a busy or missing GPU), and calls where the LLM itself failed.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "llm/client.h"

namespace ax::adapt {

struct FailedCandidate {
  std::string task;    // the task's name (accounting, the memory's example)
  std::string source;  // the candidate's code
  std::string status;  // the judge's status: compile_error, runtime_error, mismatch, ...
  std::string error;   // the judge's error text
};

struct ExtractorOptions {
  bool include_mismatch = false;
  size_t max_source_chars = 16000;  // longer sources are cut in the middle
  size_t max_error_chars = 4000;    // longer errors keep their start and (mostly) their end
  size_t max_rule_chars = 400;      // a longer "rule" is not a rule
  int max_tokens = 0;               // 0: the client's default (reasoning models need room)
  std::string prompts_dir;          // empty: the default prompts folder
};

enum class ExtractOutcome {
  kRule,            // rule holds one "You cannot ..." rule
  kNoGuidance,      // the LLM said "no guidance"
  kUnparsed,        // the reply held neither
  kSkippedStatus,   // the status is not one rules are learnt from
  kSkippedInfra,    // an infrastructure failure
  kLlmError,        // the LLM call failed
};
const char* ExtractOutcomeName(ExtractOutcome o);

struct Extraction {
  ExtractOutcome outcome = ExtractOutcome::kUnparsed;
  std::string rule;
  std::string reason;  // why there is no rule (one line)
};

struct ExtractorCounts {
  int64_t calls = 0, rules = 0, no_guidance = 0, unparsed = 0, skipped_status = 0, skipped_infra = 0, llm_errors = 0;
  nlohmann::json ToJson() const;
};

class RuleExtractor {
 public:
  // Loads prompts/rule_extractor.txt; `llm` must outlive the extractor.
  static Status Create(llm::LlmClient* llm, const ExtractorOptions& opts, std::unique_ptr<RuleExtractor>* out);

  // Whether this failure may teach a rule; when not, *why says why.
  bool Eligible(const FailedCandidate& f, std::string* why) const;
  // One LLM call (none when not eligible). Safe from many threads at once.
  Extraction Extract(const FailedCandidate& f);
  ExtractorCounts counts() const;

  // Whether an error text comes from the judge's environment, not the
  // candidate; *why names the sign.
  static bool IsInfrastructureError(const std::string& error, std::string* why = nullptr);
  // The rule in a reply: the first line starting "You cannot" (bullets,
  // quotes, "Rule:" and emphasis stripped), or "no guidance"; else unparsed.
  static ExtractOutcome ParseReply(const std::string& reply, size_t max_rule_chars, std::string* rule);

 private:
  RuleExtractor(llm::LlmClient* llm, std::string tmpl, ExtractorOptions opts);
  Status Render(const FailedCandidate& f, std::string* prompt) const;

  llm::LlmClient* llm_;
  std::string template_;
  ExtractorOptions opts_;
  std::atomic<int64_t> calls_{0}, rules_{0}, no_guidance_{0}, unparsed_{0}, skipped_status_{0}, skipped_infra_{0},
      llm_errors_{0};
};

}  // namespace ax::adapt
