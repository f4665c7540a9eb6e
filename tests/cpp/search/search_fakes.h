// Fakes for the search's tests and its benchmark (bench/search): a judge
// whose verdicts are read from markers in the candidate's source, a scripted
// proposer, and an LLM client that answers the proposer, reviser and tuner
// prompts instantly, either from per-purpose scripts or from a pure function
// of the request (so a resumed run that asks the same thing gets the same
// answer from a fresh client).
//
// Markers (one per line, anywhere in the candidate):
//   # fake: compile_error | runtime_error | mismatch | timeout
//   # fake: judge_error            the judge itself fails (no verdict)
//   # fake: speedup=2.5            correct, 2.5x vs eager (eager baseline 1 ms)
//   # fake: retime_speedup=1.2     the speedup measured by the final re-timing
//   # fake: retime_mismatch        the final re-timing finds a mismatch
//   # fake: retime_timeout=N       the first N final re-timings of it time out
//   # fake: retime_refkill=N       the first N final re-timings lose the reference worker
// No marker: correct, 1.0x.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/util.h"
#include "judge/judge.h"
#include "llm/client.h"
#include "search/proposer.h"

namespace ax::search::fakes {

// The value of the last "# fake: KEY=VALUE" line, or "".
inline std::string MarkerValue(const std::string& source, const std::string& key) {
  const std::string tag = "# fake: " + key + "=";
  std::string out;
  for (size_t p = source.find(tag); p != std::string::npos; p = source.find(tag, p + 1)) {
    size_t e = source.find('\n', p);
    out = source.substr(p + tag.size(), e == std::string::npos ? std::string::npos : e - p - tag.size());
  }
  return out;
}

inline bool HasMarker(const std::string& source, const std::string& word) {
  const std::string tag = "# fake: " + word;
  for (size_t p = source.find(tag); p != std::string::npos; p = source.find(tag, p + 1)) {
    size_t e = p + tag.size();
    if (e == source.size() || source[e] == '\n' || source[e] == ' ' || source[e] == '\r') return true;
  }
  return false;
}

// The verdict the fake judge gives; `retime` is the final re-timing
// (JudgeOptions::use_cache == false).
inline EvalResult FakeVerdict(const std::string& source, bool retime) {
  EvalResult r;
  Verdict& v = r.verdict;
  v.device = "FakeGPU";
  v.timing_source = "fake";
  if (HasMarker(source, "judge_error")) {
    r.status = Status::Error("fake judge: the worker pool is gone");
    return r;
  }
  for (const char* bad : {"compile_error", "runtime_error", "mismatch", "timeout"}) {
    if (HasMarker(source, bad)) {
      v.status = bad;
      v.correct = false;
      v.error = std::string("fake ") + bad + ": line 3\nTraceback (most recent call last):\n  boom";
      if (std::string(bad) == "mismatch") v.max_abs_error = 0.5;
      return r;
    }
  }
  double s = 1.0;
  if (std::string x = MarkerValue(source, "speedup"); !x.empty()) s = std::atof(x.c_str());
  if (retime) {
    if (std::string x = MarkerValue(source, "retime_speedup"); !x.empty()) s = std::atof(x.c_str());
    if (HasMarker(source, "retime_mismatch")) {
      v.status = "mismatch";
      v.correct = false;
      v.error = "output 0: 12 of 4096 elements differ on fresh inputs";
      return r;
    }
  }
  v.status = "ok";
  v.correct = true;
  v.max_abs_error = 0;
  v.baseline_ms = {{"eager", 1.0}};
  v.speedup = {{"eager", s}};
  v.runtime_ms = 1.0 / s;
  v.timing.median_ms = 1.0 / s;
  v.timing.n = 30;
  return r;
}

// A judge that answers at once from the markers; counts its calls.
class FakeJudge : public Judge {
 public:
  std::future<EvalResult> Submit(EvalRequest req) override {
    const bool retime = !req.options.use_cache;
    std::promise<EvalResult> p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!retime && fail_from_ >= 0 && static_cast<int>(judged_.size()) >= fail_from_) {
        EvalResult r;
        r.status = Status::Error("fake judge: killed");
        p.set_value(r);
        return p.get_future();
      }
      (retime ? retimed_ : judged_).push_back(req.candidate_source);
    }
    // "refkill=N" (a search call): the first N judgments of the source find the
    // judge's reference worker killed, an infrastructure failure.
    if (std::string k = MarkerValue(req.candidate_source, "refkill"); !retime && !k.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (++refkills_[req.candidate_source] <= std::atoi(k.c_str())) {
        EvalResult r;
        r.verdict.device = "FakeGPU";
        r.verdict.status = "runtime_error";
        r.verdict.AddFlag("reference_failed");
        r.verdict.error = "the reference failed while comparing: killed by signal 9 (Killed)";
        p.set_value(r);
        return p.get_future();
      }
    }
    if (retime) {
      std::string n = MarkerValue(req.candidate_source, "retime_timeout");
      std::string k = MarkerValue(req.candidate_source, "retime_refkill");
      std::lock_guard<std::mutex> lock(mu_);
      if ((!n.empty() || !k.empty()) &&
          ++retime_timeouts_[req.candidate_source] <= std::atoi((n.empty() ? k : n).c_str())) {
        EvalResult r;
        r.verdict.device = "FakeGPU";
        if (!n.empty()) {
          r.verdict.status = "timeout";
          r.verdict.error = "run timed out after 60 s";
        } else {
          r.verdict.status = "runtime_error";
          r.verdict.AddFlag("reference_failed");
          r.verdict.error = "the reference failed while comparing: killed by signal 9 (Killed)";
        }
        p.set_value(r);
        return p.get_future();
      }
    }
    p.set_value(FakeVerdict(req.candidate_source, retime));
    return p.get_future();
  }
  // From the n-th search call on (0-based), fail without a verdict, as a
  // judge pool that died; -1: never.
  void FailFrom(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_from_ = n;
  }
  Status CheckTask(const TaskRef&, const JudgeOptions&, TaskInfo* info) override {
    info->ok = true;
    return Status::Ok();
  }

  // Calls made by the search itself, and by the final re-timing.
  int search_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(judged_.size());
  }
  int retime_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(retimed_.size());
  }
  std::vector<std::string> judged() const {
    std::lock_guard<std::mutex> lock(mu_);
    return judged_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    judged_.clear();
    retimed_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> judged_, retimed_;
  std::map<std::string, int> retime_timeouts_;
  std::map<std::string, int> refkills_;
  int fail_from_ = -1;
};

// A proposer that replays a script, then asks `fallback` (or stops the run
// when there is none); records every context it was given.
class FakeProposer : public Proposer {
 public:
  std::deque<Proposal> script;
  std::function<Proposal(const StepContext&, int call)> fallback;
  std::vector<StepContext> contexts;
  const char* origin = "llm";
  const char* Origin() const override { return origin; }

  Proposal Propose(const StepContext& ctx) override {
    contexts.push_back(ctx);
    const int call = static_cast<int>(contexts.size()) - 1;
    if (!script.empty()) {
      Proposal p = script.front();
      script.pop_front();
      return p;
    }
    if (fallback) return fallback(ctx, call);
    Proposal p;
    p.note = "fake proposer: script exhausted";
    p.stop = Status::Error(p.note);
    return p;
  }
};

inline Proposal Source(const std::string& source, const std::string& note = {}) {
  Proposal p;
  p.source = source;
  p.note = note;
  return p;
}

// A KernelBench-style task and a Triton candidate for it, tagged so that
// every candidate is distinct, carrying a fake verdict marker.
inline const char* kTaskSource = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a ReLU activation."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
)";

inline TaskRef MakeTask(const std::string& name = "19_ReLU") {
  TaskRef t;
  t.name = name;
  t.path = "/virtual/" + name + ".py";
  t.source = kTaskSource;
  t.hash = Sha256Hex(t.source);
  return t;
}

inline std::string Kernel(const std::string& tag, const std::string& marker, int block = 1024) {
  return "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n# kernel " + tag +
         "\n" + marker +
         "\n\n\n@triton.jit\ndef relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
         "    pid = tl.program_id(0)\n"
         "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
         "    mask = offs < n\n"
         "    x = tl.load(x_ptr + offs, mask=mask)\n"
         "    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)\n\n\n"
         "class ModelNew(nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n\n"
         "    def forward(self, x):\n"
         "        out = torch.empty_like(x)\n"
         "        n = x.numel()\n"
         "        BLOCK = " +
         std::to_string(block) +
         "\n"
         "        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)\n"
         "        return out\n";
}

inline std::string Fenced(const std::string& code) { return "Here is the kernel.\n\n```python\n" + code + "```\n"; }

inline std::string EditReply(const std::string& old_text, const std::string& new_text, int n = 1) {
  const std::string k = std::to_string(n);
  return "<old_str_" + k + ">\n" + old_text + "\n</old_str_" + k + ">\n<new_str_" + k + ">\n" + new_text +
         "\n</new_str_" + k + ">\n";
}

// The kernel a tuner prompt shows (prompts/tuner.txt), or "".
inline std::string ParentFromTunerPrompt(const std::string& user) {
  size_t h = user.find("## The kernel (file `candidate.py`)");
  if (h == std::string::npos) return "";
  size_t b = user.find("```python\n", h);
  if (b == std::string::npos) return "";
  b += 10;
  size_t e = user.find("\n```", b);
  if (e == std::string::npos) return "";
  return user.substr(b, e - b + 1);
}

// The default answers: pure functions of the request's content and of how
// many times the same request was asked before (`repeat`), as a sampling
// model answers the same prompt differently each time.
//  propose: a new kernel; about 1/8 fail to compile, 1/16 are wrong, the
//           rest are correct with a speedup in [0.5, 4.5).
//  revise:  one line of guidance.
//  tune:    an edit of the parent's marker line (new speedup, new tag);
//           about 1/4 quote a line that is not in the kernel.
inline std::string DefaultReply(const llm::ChatRequest& req, int repeat = 0) {
  const std::string& user = req.messages.empty() ? std::string() : req.messages.back().content;
  const std::string h =
      Sha256Hex(req.system + "\x1f" + user + (repeat ? "\x1f" + std::to_string(repeat) : std::string()));
  const int d0 = std::stoi(h.substr(0, 1), nullptr, 16);
  const double s = 0.5 + std::stoi(h.substr(1, 2), nullptr, 16) / 64.0;
  char sp[64];
  std::snprintf(sp, sizeof sp, "# fake: speedup=%.3f", s);
  if (req.purpose == "propose") {
    std::string marker = d0 < 2 ? "# fake: compile_error" : d0 == 2 ? "# fake: mismatch" : sp;
    return Fenced(Kernel(h.substr(0, 12), marker, 256 << (d0 % 4)));
  }
  if (req.purpose == "revise") return "- Try a larger BLOCK and fewer launches (" + h.substr(0, 6) + ").";
  // tune, tune-retry
  const std::string parent = ParentFromTunerPrompt(user);
  size_t p = parent.find("# fake: ");
  if (d0 < 4 || p == std::string::npos) return EditReply("    this_line = 'is not in the kernel'", "    pass");
  size_t e = parent.find('\n', p);
  std::string old_line = parent.substr(p, e == std::string::npos ? std::string::npos : e - p);
  return EditReply(old_line, std::string(sp) + "\n# tuned " + h.substr(0, 12));
}

// An LLM client answering at once, from per-purpose scripts first, then from
// DefaultReply (counting repeats of identical requests); records every
// request.
class FakeLlm : public llm::LlmClient {
 public:
  struct Scripted {
    std::string text;
    llm::ErrorKind error = llm::ErrorKind::kNone;
    std::string message;  // for errors
  };

  void Script(const std::string& purpose, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    scripts_[purpose].push_back({text, llm::ErrorKind::kNone, ""});
  }
  void ScriptError(const std::string& purpose, llm::ErrorKind k, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    scripts_[purpose].push_back({"", k, message});
  }
  // Every call not answered by a script fails with this error.
  void FailEverything(llm::ErrorKind k, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_all_ = Scripted{"", k, message};
  }

  void ChatAsync(llm::ChatRequest req, llm::ChatCallback done) override {
    llm::ChatResult r;
    r.provider = "fake";
    r.model = "fake-1";
    Scripted s;
    bool scripted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
      auto it = scripts_.find(req.purpose);
      if (it != scripts_.end() && !it->second.empty()) {
        s = it->second.front();
        it->second.pop_front();
        scripted = true;
      } else if (fail_all_) {
        s = *fail_all_;
        scripted = true;
      }
    }
    if (!scripted) {
      int repeat;
      {
        std::lock_guard<std::mutex> lock(mu_);
        repeat = seen_[llm::RequestHash(req)]++;
      }
      s.text = DefaultReply(req, repeat);
    }
    if (s.error != llm::ErrorKind::kNone) {
      r.status = Status::Error(s.message);
      r.error = s.error;
    } else {
      r.reply.text = s.text;
      r.reply.model = "fake-1";
      r.usage.input_tokens = static_cast<int64_t>(req.system.size() + req.messages.back().content.size()) / 4;
      r.usage.output_tokens = static_cast<int64_t>(s.text.size()) / 4;
    }
    done(std::move(r));
  }
  std::string Describe() const override { return "fake:fake-1"; }

  std::vector<llm::ChatRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> purposes() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& r : requests_) out.push_back(r.purpose);
    return out;
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(requests_.size());
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::deque<Scripted>> scripts_;
  std::optional<Scripted> fail_all_;
  std::map<std::string, int> seen_;
  std::vector<llm::ChatRequest> requests_;
};

}  // namespace ax::search::fakes
