// Proposer: where candidate kernels come from. The search asks for a large
// step (a new kernel, shown a diverse pool of good ones) or a small step (an
// edit of one kernel, guided by its recent history) and never knows whether
// an LLM or the builtin generator answers.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "llm/client.h"
#include "search/prompts.h"
#include "search/run_store.h"
#include "search/tree.h"

namespace ax::search {

struct StepContext {
  std::string task;       // task name
  bool large = true;      // large step (new kernel) or small step (edit of prompt.parent)
  PromptInputs prompt;    // what the prompts show: task, pool, path, parent, rules
  // Small step: the parent as data (the prompt shows it as text).
  nlohmann::json parent_plan;   // the plan its proposer recorded with it (null: none)
  bool parent_correct = false;  // its verdict was correct
  // Where the parent's GPU time went, longest kernel first (empty: not profiled).
  std::vector<Outcome::KernelMs> parent_kernels;
  double parent_runtime_ms = 0;  // its measured median (0: not measured)
};

struct Proposal {
  std::string source;           // the candidate; empty when the step produced none
  std::string note;             // guidance used, edit report, or why there is no candidate
  // How the proposer made the candidate, in its own terms (the builtin
  // compiler's plan); kept with the node and handed back to a small step
  // from it as StepContext::parent_plan. Null for LLM candidates.
  nlohmann::json plan;
  bool infra_failure = false;   // the LLM failed (network, quota): not the kernel's fault
  // Not ok: this task's search cannot go on. The code says why:
  // kUnauthenticated, kNotFound, kResourceExhausted: the provider rejected
  // the key, the model or the account (RejectedByProvider); kCancelled: the
  // run's own token or dollar budget is spent; kInvalidInput: the client is
  // misconfigured; kError: anything else (a prompt or the store failed, the
  // builtin proposer declined the task).
  Status stop;
};

// The provider refused to serve this run at all (401/403, 404, an exhausted
// quota): no further call can succeed until the user fixes the setup.
inline bool RejectedByProvider(const Status& s) {
  return s.code() == StatusCode::kUnauthenticated || s.code() == StatusCode::kNotFound ||
         s.code() == StatusCode::kResourceExhausted;
}

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual Proposal Propose(const StepContext& ctx) = 0;
  // LLM calls made so far and how many of them came from the run store.
  virtual std::pair<int, int> Calls() const { return {0, 0}; }
  // Where its kernels come from, as summaries name it: "llm" or "builtin".
  virtual const char* Origin() const = 0;
};

// The LLM calls of one task's search, numbered in order and kept in the run
// store. On resume, a call already recorded under the same number with the
// same request is served from the store instead of asked again (calls that
// failed for infrastructure reasons are asked again).
class LlmCaller {
 public:
  LlmCaller(llm::LlmClient* client, RunStore* store, std::string task, int max_tokens)
      : client_(client), store_(store), task_(std::move(task)), max_tokens_(max_tokens) {}
  llm::ChatResult Ask(const std::string& purpose, const RenderedPrompt& prompt, Status* store_error);
  int calls() const { return seq_; }
  int replayed() const { return replayed_; }

 private:
  llm::LlmClient* client_;
  RunStore* store_;
  std::string task_;
  int max_tokens_;
  int seq_ = 0;
  int replayed_ = 0;
};

// Large step: the proposer prompt, then the first code block of the reply.
// Small step: the reviser turns the recent path into guidance; the tuner
// returns numbered edits, applied to the parent; edits that do not apply go
// back to the tuner once with the reasons.
class LlmProposer : public Proposer {
 public:
  LlmProposer(const Prompts* prompts, LlmCaller* caller) : prompts_(prompts), caller_(caller) {}
  Proposal Propose(const StepContext& ctx) override;
  std::pair<int, int> Calls() const override { return {caller_->calls(), caller_->replayed()}; }
  const char* Origin() const override { return "llm"; }

 private:
  Proposal Fail(const llm::ChatResult& r, const std::string& what);
  const Prompts* prompts_;
  LlmCaller* caller_;
};

}  // namespace ax::search
