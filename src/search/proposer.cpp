#include "search/proposer.h"

#include "common/util.h"
#include "llm/edits.h"
#include "llm/extract.h"
#include "llm/recorder.h"

namespace ax::search {

namespace {

bool InfraError(llm::ErrorKind k) {
  using llm::ErrorKind;
  return k == ErrorKind::kTimeout || k == ErrorKind::kConnection || k == ErrorKind::kServer ||
         k == ErrorKind::kRateLimited || k == ErrorKind::kShutdown || k == ErrorKind::kBudget ||
         k == ErrorKind::kMalformed;
}

bool FatalError(llm::ErrorKind k) {
  using llm::ErrorKind;
  return k == ErrorKind::kBudget || k == ErrorKind::kAuth || k == ErrorKind::kQuota || k == ErrorKind::kConfig ||
         k == ErrorKind::kNotFound;
}

// Why a failed call ends the search, as a typed code (Proposal::stop).
StatusCode StopCode(llm::ErrorKind k) {
  using llm::ErrorKind;
  switch (k) {
    case ErrorKind::kAuth: return StatusCode::kUnauthenticated;
    case ErrorKind::kNotFound: return StatusCode::kNotFound;
    case ErrorKind::kQuota: return StatusCode::kResourceExhausted;
    case ErrorKind::kBudget: return StatusCode::kCancelled;
    case ErrorKind::kConfig: return StatusCode::kInvalidInput;
    default: return StatusCode::kError;
  }
}

// A proposal that ends the search because this side failed (a prompt, the store).
Proposal Stop(const std::string& why) {
  Proposal p;
  p.note = why;
  p.infra_failure = true;
  p.stop = Status::Error(why);
  return p;
}

}  // namespace

llm::ChatResult LlmCaller::Ask(const std::string& purpose, const RenderedPrompt& prompt, Status* store_error) {
  llm::ChatRequest req;
  req.system = prompt.system;
  req.messages = {{"user", prompt.user}};
  req.max_tokens = max_tokens_;
  req.task = task_;
  req.purpose = purpose;
  const int seq = seq_++;
  const std::string hash = llm::RequestHash(req);
  if (store_) {
    if (auto stored = store_->GetCall(task_, seq); stored && stored->request_hash == hash) {
      llm::CallRecord rec;
      // Failures that a retry (or a fixed key) may cure are asked again.
      if (llm::RecordFromJsonLine(stored->record_json, &rec).ok() && !InfraError(rec.result.error) &&
          !FatalError(rec.result.error)) {
        ++replayed_;
        return rec.result;
      }
    }
  }
  const double t0 = static_cast<double>(std::time(nullptr));
  llm::ChatResult res = client_->ChatSync(req);
  if (store_) {
    llm::CallRecord rec;
    rec.unix_time = t0;
    rec.provider = res.provider;
    rec.model = res.model;
    rec.task = task_;
    rec.purpose = purpose;
    rec.request_hash = hash;
    rec.request = req;
    rec.result = res;
    Status s = store_->PutCall(task_, seq, purpose, hash, llm::RecordToJsonLine(rec));
    if (!s.ok() && store_error) *store_error = s;
  }
  return res;
}

Proposal LlmProposer::Fail(const llm::ChatResult& r, const std::string& what) {
  Proposal p;
  p.note = what + ": " + r.status.message();
  p.infra_failure = InfraError(r.error) || FatalError(r.error);
  if (FatalError(r.error)) p.stop = Status::Error(StopCode(r.error), p.note);
  return p;
}

Proposal LlmProposer::Propose(const StepContext& ctx) {
  Status store_error;
  RenderedPrompt prompt;
  if (ctx.large) {
    Status s = prompts_->Proposer(ctx.prompt, &prompt);
    if (!s.ok()) return Stop("prompt: " + s.message());
    llm::ChatResult r = caller_->Ask("propose", prompt, &store_error);
    if (!store_error.ok()) return Stop(store_error.message());
    if (!r.ok() && r.error != llm::ErrorKind::kTruncated) return Fail(r, "the proposer call failed");
    llm::Extracted code = llm::ExtractCode(r.reply.text);
    Proposal p;
    p.source = Trim(code.code).empty() ? "" : code.code + "\n";
    if (r.error == llm::ErrorKind::kTruncated || code.unterminated) p.note = "the reply was cut off at the token limit";
    if (p.source.empty()) p.note = "the reply held no code";
    return p;
  }
  // Small step: reviser, then tuner.
  Status s = prompts_->Reviser(ctx.prompt, &prompt);
  if (!s.ok()) return Stop("prompt: " + s.message());
  llm::ChatResult rev = caller_->Ask("revise", prompt, &store_error);
  if (!store_error.ok()) return Stop(store_error.message());
  if (!rev.ok() && rev.error != llm::ErrorKind::kTruncated) return Fail(rev, "the reviser call failed");
  PromptInputs in = ctx.prompt;
  in.guidance = Trim(rev.reply.text);
  std::string feedback;
  llm::EditReport report;
  for (int attempt = 0; attempt < 2; ++attempt) {
    in.feedback = feedback;
    s = prompts_->Tuner(in, &prompt);
    if (!s.ok()) return Stop("prompt: " + s.message());
    llm::ChatResult tun = caller_->Ask(attempt == 0 ? "tune" : "tune-retry", prompt, &store_error);
    if (!store_error.ok()) return Stop(store_error.message());
    if (!tun.ok() && tun.error != llm::ErrorKind::kTruncated) return Fail(tun, "the tuner call failed");
    report = llm::ApplyEditReply(ctx.prompt.parent.source, tun.reply.text);
    bool any = false;
    for (const auto& o : report.outcomes) any = any || o.applied();
    if (any) {
      Proposal p;
      p.source = report.text;
      p.note = "guidance:\n" + in.guidance + (report.all_applied() ? "" : "\nedits:\n" + report.Summary());
      return p;
    }
    feedback = report.Summary();  // fed back to the tuner, not dropped
  }
  Proposal p;
  p.note = "guidance:\n" + in.guidance + "\nno edit applied:\n" + report.Summary();
  return p;
}

}  // namespace ax::search
