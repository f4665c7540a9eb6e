#include "adapt/rule_extractor.h"

#include <cctype>
#include <sstream>

#include "common/util.h"
#include "judge/verdict.h"
#include "search/prompts.h"

namespace ax::adapt {

namespace {

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool StartsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string StripThinking(std::string s) {
  for (;;) {
    size_t a = s.find("<think>");
    if (a == std::string::npos) break;
    size_t b = s.find("</think>", a);
    s.erase(a, b == std::string::npos ? std::string::npos : b + 8 - a);
  }
  return s;
}

// Drops decoration around a reply line: bullets, numbering, quotes,
// emphasis, a "Rule:" label.
std::string Undecorate(std::string t) {
  static const char* kQuotes[] = {"\xE2\x80\x9C", "\xE2\x80\x9D", "\xE2\x80\x98", "\xE2\x80\x99", "\xE2\x80\xA2"};
  for (bool changed = true; changed;) {
    changed = false;
    t = Trim(t);
    if (t.empty()) break;
    for (const char* q : kQuotes) {
      if (StartsWith(t, q)) {
        t.erase(0, std::string(q).size());
        changed = true;
      }
      std::string qs(q);
      if (t.size() >= qs.size() && t.compare(t.size() - qs.size(), qs.size(), qs) == 0) {
        t.erase(t.size() - qs.size());
        changed = true;
      }
    }
    if (t.empty()) break;
    if (std::string("-*>\"'`_#").find(t[0]) != std::string::npos) {
      t.erase(0, 1);
      changed = true;
      continue;
    }
    if (std::string("\"'`*_").find(t.back()) != std::string::npos) {
      t.pop_back();
      changed = true;
      continue;
    }
    size_t d = 0;
    while (d < t.size() && std::isdigit(static_cast<unsigned char>(t[d]))) ++d;
    if (d > 0 && d < t.size() && (t[d] == '.' || t[d] == ')')) {
      t.erase(0, d + 1);
      changed = true;
      continue;
    }
    std::string low = Lower(t.substr(0, 12));
    for (const char* label : {"rule:", "answer:", "final answer:"}) {
      if (StartsWith(low, label)) {
        t.erase(0, std::string(label).size());
        changed = true;
        break;
      }
    }
  }
  return t;
}

std::string CollapseSpaces(const std::string& s) {
  std::string out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Keeps the start and the end of a long text, with a marker between.
std::string Cut(const std::string& s, size_t max, size_t head_share_of_3) {
  if (s.size() <= max) return s;
  size_t head = max * head_share_of_3 / 3, tail = max - head;
  return s.substr(0, head) + "\n... (" + std::to_string(s.size() - max) + " characters cut) ...\n" +
         s.substr(s.size() - tail);
}

}  // namespace

const char* ExtractOutcomeName(ExtractOutcome o) {
  switch (o) {
    case ExtractOutcome::kRule: return "rule";
    case ExtractOutcome::kNoGuidance: return "no_guidance";
    case ExtractOutcome::kUnparsed: return "unparsed";
    case ExtractOutcome::kSkippedStatus: return "skipped_status";
    case ExtractOutcome::kSkippedInfra: return "skipped_infrastructure";
    case ExtractOutcome::kLlmError: return "llm_error";
  }
  return "?";
}

nlohmann::json ExtractorCounts::ToJson() const {
  return {{"calls", calls},       {"rules", rules},          {"no_guidance", no_guidance},
          {"unparsed", unparsed}, {"skipped_status", skipped_status}, {"skipped_infrastructure", skipped_infra},
          {"llm_errors", llm_errors}};
}

RuleExtractor::RuleExtractor(llm::LlmClient* llm, std::string tmpl, ExtractorOptions opts)
    : llm_(llm), template_(std::move(tmpl)), opts_(std::move(opts)) {}

Status RuleExtractor::Create(llm::LlmClient* llm, const ExtractorOptions& opts, std::unique_ptr<RuleExtractor>* out) {
  if (!llm) return Status::Error("rule extraction needs an LLM proposer");
  std::string dir = opts.prompts_dir.empty() ? search::Prompts::DefaultDir() : opts.prompts_dir;
  auto t = ReadFile(dir + "/rule_extractor.txt");
  if (!t) return Status::Error("prompt template missing: " + dir + "/rule_extractor.txt");
  out->reset(new RuleExtractor(llm, *t, opts));
  std::string probe;
  Status s = (*out)->Render({"t", "x", "compile_error", "e"}, &probe);
  if (!s.ok()) {
    out->reset();
    return Status::Error(dir + "/rule_extractor.txt: " + s.message());
  }
  return Status::Ok();
}

bool RuleExtractor::IsInfrastructureError(const std::string& error, std::string* why) {
  // Signs that the judge, its machine or the network failed, not the kernel.
  static const char* kSigns[] = {
      "the judge",                   "judge worker",
      "judge pool",                  "judge's",
      "adaexplore_worker",           "reference worker",
      "the reference failed",        "the reference timed out",
      "scratch folder",              "no space left on device",
      "disk quota exceeded",         "read-only file system",
      "too many open files",         "resource temporarily unavailable",
      "cannot allocate memory",      "out of memory",
      "connection refused",          "connection reset",
      "network is unreachable",      "temporary failure in name resolution",
      "no cuda gpus are available",  "no cuda device",
      "cuda driver version is insufficient", "busy or unavailable",
      "cuda-capable device",         "did not finish within",
  };
  std::string low = Lower(error);
  for (const char* s : kSigns) {
    if (low.find(s) != std::string::npos) {
      if (why) *why = std::string("infrastructure failure (the error mentions '") + s + "')";
      return true;
    }
  }
  return false;
}

bool RuleExtractor::Eligible(const FailedCandidate& f, std::string* why) const {
  bool status_ok = f.status == kStatusCompileError || f.status == kStatusRuntimeError ||
                   (opts_.include_mismatch && f.status == kStatusMismatch);
  if (!status_ok) {
    if (f.status == kStatusTimeout || f.status == kStatusCrashed) {
      *why = "status " + f.status + " is not the kernel's mistake alone (load, the judge's environment)";
    } else {
      *why = "status '" + f.status + "' teaches no rule";
    }
    return false;
  }
  if (Trim(f.error).empty()) {
    *why = "the verdict has no error text";
    return false;
  }
  if (Trim(f.source).empty()) {
    *why = "the candidate has no source";
    return false;
  }
  return true;
}

Status RuleExtractor::Render(const FailedCandidate& f, std::string* prompt) const {
  return search::RenderTemplate(template_,
                                {{"status", f.status},
                                 {"error", Cut(Trim(f.error), opts_.max_error_chars, 1)},
                                 {"source", Cut(Trim(f.source), opts_.max_source_chars, 2)}},
                                prompt);
}

ExtractOutcome RuleExtractor::ParseReply(const std::string& reply, size_t max_rule_chars, std::string* rule) {
  std::istringstream in(StripThinking(reply));
  std::string line;
  while (std::getline(in, line)) {
    std::string t = Undecorate(line);
    if (t.empty()) continue;
    std::string low = Lower(t);
    if (StartsWith(low, "you cannot ")) {
      std::string r = CollapseSpaces("You cannot " + t.substr(11));
      if (r.size() > max_rule_chars) return ExtractOutcome::kUnparsed;
      *rule = r;
      return ExtractOutcome::kRule;
    }
    if (StartsWith(low, "no guidance")) return ExtractOutcome::kNoGuidance;
  }
  return ExtractOutcome::kUnparsed;
}

Extraction RuleExtractor::Extract(const FailedCandidate& f) {
  Extraction x;
  std::string why;
  if (!Eligible(f, &why)) {
    x.outcome = ExtractOutcome::kSkippedStatus;
    x.reason = why;
    ++skipped_status_;
    return x;
  }
  if (IsInfrastructureError(f.error, &why)) {
    x.outcome = ExtractOutcome::kSkippedInfra;
    x.reason = why;
    ++skipped_infra_;
    return x;
  }
  llm::ChatRequest req;
  llm::Message m;
  m.role = "user";
  Status s = Render(f, &m.content);
  if (!s.ok()) {  // Create checked the template, so this is unexpected
    x.outcome = ExtractOutcome::kLlmError;
    x.reason = "rule_extractor.txt: " + s.message();
    ++llm_errors_;
    return x;
  }
  req.messages.push_back(std::move(m));
  req.max_tokens = opts_.max_tokens;
  req.task = f.task;
  req.purpose = "rule_extractor";
  ++calls_;
  llm::ChatResult r = llm_->ChatSync(std::move(req));
  if (!r.ok()) {
    x.outcome = ExtractOutcome::kLlmError;
    x.reason = "rule extraction LLM call failed: " + r.status.message();
    ++llm_errors_;
    return x;
  }
  x.outcome = ParseReply(r.reply.text, opts_.max_rule_chars, &x.rule);
  switch (x.outcome) {
    case ExtractOutcome::kRule: ++rules_; break;
    case ExtractOutcome::kNoGuidance:
      ++no_guidance_;
      x.reason = "the LLM found no guidance";
      break;
    default:
      ++unparsed_;
      x.reason = "the reply holds no 'You cannot ...' rule: " + FirstLine(Trim(StripThinking(r.reply.text)), 120);
      break;
  }
  return x;
}

ExtractorCounts RuleExtractor::counts() const {
  ExtractorCounts c;
  c.calls = calls_;
  c.rules = rules_;
  c.no_guidance = no_guidance_;
  c.unparsed = unparsed_;
  c.skipped_status = skipped_status_;
  c.skipped_infra = skipped_infra_;
  c.llm_errors = llm_errors_;
  return c;
}

}  // namespace ax::adapt
