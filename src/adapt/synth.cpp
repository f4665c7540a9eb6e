#include "adapt/synth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "adapt/catalogue.h"
#include "adapt/task_signature.h"
#include "common/install_paths.h"
#include "common/util.h"
#include "judge/task.h"
#include "llm/extract.h"
#include "search/prompts.h"

namespace ax::adapt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A task every working judge accepts: a failure here is the environment's.
const char* kProbeTask = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super(Model, self).__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return [8]
)";

bool FatalLlmError(llm::ErrorKind k) {
  switch (k) {
    case llm::ErrorKind::kConfig:
    case llm::ErrorKind::kAuth:
    case llm::ErrorKind::kQuota:
    case llm::ErrorKind::kBadRequest:
    case llm::ErrorKind::kNotFound:
    case llm::ErrorKind::kBudget:
    case llm::ErrorKind::kReplayMiss:
    case llm::ErrorKind::kShutdown:
      return true;
    default:
      return false;
  }
}

std::string HumanBytes(long long b) {
  char buf[64];
  if (b >= (1LL << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1LL << 30));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1LL << 20));
  }
  return buf;
}

bool AppendLine(const std::string& path, const std::string& line) {
  std::ofstream f(path, std::ios::app);
  if (!f) return false;
  f << line << '\n';
  return static_cast<bool>(f.flush());
}

// The numeric prefix of "12_Conv2d_ReLU.py", or -1.
long long IdOf(const std::string& file) {
  size_t i = 0;
  while (i < file.size() && std::isdigit(static_cast<unsigned char>(file[i]))) ++i;
  if (i == 0 || i >= file.size() || file[i] != '_') return -1;
  return std::stoll(file.substr(0, i));
}

// A candidate on its way through the gate.
struct Candidate {
  std::string name;     // without the index
  std::string source;
  json plan;            // the composer's ops, or the drawn operators for the LLM
  std::string origin;   // "programmatic" or the client's description
};

class Synthesizer {
 public:
  Synthesizer(const SynthOptions& o, Judge* judge) : o_(o), judge_(judge), rng_(o.seed) {}

  SynthResult Run() {
    if (Status s = Setup(); !s.ok()) return Stop(r_.failure, s);
    const int budget = o_.max_attempts > 0 ? o_.max_attempts : 5 * o_.count;
    std::unique_ptr<Composer> composer;
    if (!o_.llm) composer = std::make_unique<Composer>(o_.scale, o_.seed, o_.min_ops, o_.max_ops);
    while (r_.kept < o_.count && r_.attempts < budget) {
      const int attempt = ++r_.attempts;
      Candidate c;
      if (composer) {
        ComposedTask t;
        if (Status s = composer->Next(&t); !s.ok()) {
          Reject(attempt, c, "compose", s.message(), false);
          return Stop(SynthFailure::kUsage, s);
        }
        c.name = t.name;
        c.source = t.source;
        c.origin = "programmatic";
        c.plan = json::array();
        for (size_t i = 0; i < t.ops.size(); ++i) {
          c.plan.push_back({{"kind", t.ops[i].kind}, {"params", t.ops[i].params},
                            {"shape", t.shapes[i]}});
        }
      } else {
        bool fatal = false;
        Status s = Ask(attempt, &c, &fatal);
        if (fatal) return Stop(SynthFailure::kLlm, s);
        if (!s.ok()) continue;  // recorded
      }
      Status s = Gate(attempt, c);
      if (!s.ok()) return Stop(r_.failure, s);
    }
    Cleanup();
    if (r_.kept < o_.count) {
      r_.status = Status::Error("kept " + std::to_string(r_.kept) + " of " + std::to_string(o_.count) +
                                " tasks: the attempt budget (" + std::to_string(budget) +
                                ") is spent; reasons in " + rejected_path_);
    }
    return r_;
  }

 private:
  SynthResult Stop(SynthFailure f, const Status& s) {
    Cleanup();
    r_.failure = f;
    r_.status = s;
    return r_;
  }

  void Cleanup() {
    if (!staging_.empty()) RemoveTree(staging_);
    staging_.clear();
  }

  void Log(const std::string& line) {
    if (o_.progress) o_.progress(line);
  }

  Status Setup() {
    r_.failure = SynthFailure::kUsage;
    if (o_.out_dir.empty()) return Status::Error("--out is required");
    if (o_.count < 1) return Status::Error("--count must be at least 1");
    if (o_.min_ops < 1 || o_.max_ops < o_.min_ops) return Status::Error("need 1 <= min ops <= max ops");
    std::error_code ec;
    r_.failure = SynthFailure::kIo;
    fs::create_directories(o_.out_dir, ec);
    if (ec || !fs::is_directory(o_.out_dir)) return Status::Error("cannot create " + o_.out_dir + ": " + ec.message());
    dir_ = fs::absolute(o_.out_dir).string();
    rejected_path_ = dir_ + "/rejected.jsonl";
    manifest_path_ = dir_ + "/tasks.jsonl";

    // What the folder holds already: those tasks count for deduplication,
    // and new ones are numbered after them.
    if (auto m = ReadFile(manifest_path_)) {
      std::stringstream ss(*m);
      std::string line;
      while (std::getline(ss, line)) {
        if (Trim(line).empty()) continue;
        try {
          json j = json::parse(line);
          signatures_[j.value("signature", "")] = j.value("file", "");
        } catch (const std::exception&) {
          return Status::Error(manifest_path_ + " has a line that is not JSON; move it away or pick another --out");
        }
      }
    }
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (!e.is_regular_file() || e.path().extension() != ".py") continue;
      std::string file = e.path().filename().string();
      next_id_ = std::max(next_id_, IdOf(file) + 1);
      if (auto src = ReadFile(e.path().string())) sources_[Sha256Hex(NormaliseSource(*src))] = file;
    }
    staging_ = MakeTempDir(dir_, ".staging-");
    if (staging_.empty()) return Status::Error("cannot create a staging folder in " + dir_);

    if (o_.llm) {
      r_.failure = SynthFailure::kUsage;
      std::string tmpl_path = o_.prompt_file.empty() ? search::Prompts::DefaultDir() + "/synth.txt" : o_.prompt_file;
      auto tmpl = ReadFile(tmpl_path);
      if (!tmpl) return Status::Error("prompt template missing: " + tmpl_path);
      template_ = *tmpl;
      std::string ex_dir = o_.examples_dir.empty() ? DefaultExamplesDir() : o_.examples_dir;
      for (const auto& e : fs::directory_iterator(ex_dir, ec)) {
        if (!e.is_regular_file() || e.path().extension() != ".py") continue;
        auto src = ReadFile(e.path().string());
        // Long examples cost tokens and teach nothing more about the format.
        if (src && src->find("class Model") != std::string::npos && src->size() <= 6000) {
          examples_.push_back({e.path().filename().string(), *src});
        }
      }
      if (ec) return Status::Error("cannot read the examples folder " + ex_dir + ": " + ec.message());
      if (examples_.empty()) return Status::Error("no KernelBench task files (*.py with class Model) in " + ex_dir);
      std::sort(examples_.begin(), examples_.end());
    }

    // A trivial task first: a judge that cannot run it is broken, and no
    // candidate should be blamed (or an LLM call paid) for that.
    r_.failure = SynthFailure::kEnvironment;
    std::string probe = staging_ + "/probe.py";
    if (!WriteFile(probe, kProbeTask)) return Status::Error("cannot write " + probe);
    TaskRef t;
    if (Status s = ReadTask(probe, &t); !s.ok()) return s;
    TaskInfo info;
    Status s = judge_->CheckTask(t, o_.judge, &info);
    if (!s.ok() || !info.ok) {
      return Status::Error("the judge cannot run a trivial task on " + o_.judge.device + ": " +
                           (info.error.empty() ? s.message() : info.error));
    }
    r_.failure = SynthFailure::kNone;
    return Status::Ok();
  }

  // One LLM proposal. Not ok: recorded as rejected (or fatal, when *fatal).
  Status Ask(int attempt, Candidate* c, bool* fatal) {
    // Operators for this prompt: one layer, then others of any kind.
    std::vector<const OpSpec*> layers, rest;
    for (const auto& op : Catalogue()) (op.category == OpCategory::kLayer ? layers : rest).push_back(&op);
    const int n = o_.min_ops + static_cast<int>(rng_() % static_cast<uint64_t>(o_.max_ops - o_.min_ops + 1));
    std::vector<const OpSpec*> drawn = {layers[rng_() % layers.size()]};
    while (static_cast<int>(drawn.size()) < n && !rest.empty()) {
      size_t i = rng_() % rest.size();
      drawn.push_back(rest[i]);
      rest.erase(rest.begin() + static_cast<long>(i));
    }
    std::string ops_text;
    c->plan = json::array();
    for (const OpSpec* op : drawn) {
      ops_text += "- " + DescribeOp(*op) + "\n";
      c->plan.push_back(op->kind);
    }
    // Examples: a seeded draw from the folder.
    std::vector<size_t> idx(examples_.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng_);
    std::string ex_text;
    const size_t shown = std::min<size_t>(static_cast<size_t>(std::max(1, o_.examples)), idx.size());
    for (size_t i = 0; i < shown; ++i) {
      const auto& [file, src] = examples_[idx[i]];
      ex_text += "### " + file + "\n\n```python\n" + src + (src.empty() || src.back() == '\n' ? "" : "\n") + "```\n\n";
    }
    std::string avoid;
    int listed = 0;
    for (auto it = signatures_.rbegin(); it != signatures_.rend() && listed < 30; ++it, ++listed) {
      avoid += "- " + it->first + "\n";
    }
    std::map<std::string, std::string> values = {
        {"examples", Trim(ex_text)}, {"operators", Trim(ops_text)},
        {"min_ops", std::to_string(o_.min_ops)}, {"max_ops", std::to_string(o_.max_ops)},
        {"sizes", LimitsFor(o_.scale).Describe()}, {"avoid", Trim(avoid)}};
    llm::ChatRequest req;
    if (Status s = search::RenderTemplate(template_, values, &req.messages.emplace_back().content); !s.ok()) {
      *fatal = true;
      return Status::Error("synth prompt: " + s.message());
    }
    req.messages.back().role = "user";
    req.max_tokens = o_.llm_max_tokens;
    req.task = "synth";
    req.purpose = "synth";
    llm::ChatResult res = o_.llm->ChatSync(req);
    c->origin = o_.llm->Describe();
    if (!res.ok()) {
      if (FatalLlmError(res.error)) {
        *fatal = true;
        Reject(attempt, *c, "llm", res.status.message(), false);
        return Status::Error("LLM: " + res.status.message());
      }
      Reject(attempt, *c, "llm", std::string(llm::ErrorKindName(res.error)) + ": " + res.status.message(), false);
      return res.status;
    }
    llm::Extracted ex = llm::ExtractCode(res.reply.text);
    c->source = ex.code;
    if (!c->source.empty() && c->source.back() != '\n') c->source += '\n';
    if (c->source.find("class Model") == std::string::npos || c->source.find("def get_inputs") == std::string::npos ||
        c->source.find("def get_init_inputs") == std::string::npos) {
      c->name = "reply";
      Reject(attempt, *c, "extract",
             std::string("the reply holds no KernelBench task (class Model, get_inputs, get_init_inputs)") +
                 (ex.unterminated ? "; its code block never closed" : ""),
             true);
      return Status::Error("no task in the reply");
    }
    c->name = TaskNameFromOps(ForwardOps(c->source));
    return Status::Ok();
  }

  // Validates, deduplicates and writes one candidate. Not ok: stop the run.
  Status Gate(int attempt, const Candidate& c) {
    static const std::regex not_plain("\\btriton\\b|load_inline|cpp_extension|\\bModelNew\\b");
    if (std::regex_search(c.source, not_plain)) {
      Reject(attempt, c, "not_plain_pytorch",
             "a task must be plain PyTorch (no Triton, no CUDA extensions, no ModelNew)", true);
      return Status::Ok();
    }
    const std::string norm_hash = Sha256Hex(NormaliseSource(c.source));
    if (auto it = sources_.find(norm_hash); it != sources_.end()) {
      Reject(attempt, c, "duplicate_source", "same normalised source as " + it->second, false);
      return Status::Ok();
    }
    std::string path = staging_ + "/attempt-" + std::to_string(attempt) + ".py";
    if (!WriteFile(path, c.source)) {
      r_.failure = SynthFailure::kIo;
      return Status::Error("cannot write " + path);
    }
    TaskRef t;
    if (Status s = ReadTask(path, &t); !s.ok()) {
      Reject(attempt, c, "invalid", FirstLine(s.message()), true);
      return Status::Ok();
    }
    t.name = c.name;
    TaskInfo info;
    const double t0 = NowSeconds();
    Status s = judge_->CheckTask(t, o_.judge, &info);
    const double secs = NowSeconds() - t0;
    if (!s.ok() && info.error.empty()) {
      r_.failure = SynthFailure::kEnvironment;
      return Status::Error("the judge failed: " + s.message());
    }
    if (!info.ok) {
      Reject(attempt, c, "invalid", FirstLine(info.error), true);
      return Status::Ok();
    }
    if (!info.degenerate.empty()) {
      std::string d;
      for (const auto& x : info.degenerate) d += (d.empty() ? "" : ", ") + x;
      Reject(attempt, c, "degenerate", d, true);
      return Status::Ok();
    }
    const long long bytes = OutputBytes(info.outputs_json);
    json outputs = json::array();
    try {
      outputs = json::parse(info.outputs_json);
    } catch (const std::exception&) {
    }
    if (bytes < 0 || outputs.empty()) {
      Reject(attempt, c, "invalid", "the judge reported no readable outputs: " + info.outputs_json, true);
      return Status::Ok();
    }
    if (bytes == 0) {
      Reject(attempt, c, "invalid", "the output is empty (a zero-size dimension)", true);
      return Status::Ok();
    }
    if (bytes > o_.max_output_bytes) {
      Reject(attempt, c, "too_large",
             "output " + HumanBytes(bytes) + " is over the limit of " + HumanBytes(o_.max_output_bytes), false);
      return Status::Ok();
    }
    const std::string sig = TaskSignature(c.source, info.outputs_json);
    if (auto it = signatures_.find(sig); it != signatures_.end()) {
      Reject(attempt, c, "duplicate_signature", "operator signature '" + sig + "' as " + it->second, false);
      return Status::Ok();
    }

    const std::string file = std::to_string(next_id_) + "_" + c.name + ".py";
    const std::string final_path = dir_ + "/" + file;
    std::error_code ec;
    fs::rename(path, final_path, ec);
    if (ec) {
      r_.failure = SynthFailure::kIo;
      return Status::Error("cannot write " + final_path + ": " + ec.message());
    }
    ++next_id_;
    json entry = {{"file", file},          {"name", c.name},         {"signature", sig},
                  {"source_hash", norm_hash}, {"outputs", outputs},  {"origin", c.origin},
                  {"seed", o_.seed},       {"attempt", attempt},     {"size", SizeScaleName(o_.scale)},
                  {"plan", c.plan},        {"check_seconds", secs}};
    if (!AppendLine(manifest_path_, entry.dump())) {
      r_.failure = SynthFailure::kIo;
      return Status::Error("cannot write " + manifest_path_);
    }
    signatures_[sig] = file;
    sources_[norm_hash] = file;
    ++r_.kept;
    r_.files.push_back(final_path);
    Log("[" + std::to_string(r_.kept) + "/" + std::to_string(o_.count) + "] kept " + file + "  " + sig);
    return Status::Ok();
  }

  void Reject(int attempt, const Candidate& c, const std::string& stage, const std::string& reason, bool keep_source) {
    ++r_.rejected;
    ++r_.rejections[stage];
    json j = {{"attempt", attempt}, {"name", c.name}, {"stage", stage}, {"reason", reason}, {"origin", c.origin}};
    if (!c.plan.is_null()) j["plan"] = c.plan;
    if (keep_source && !c.source.empty()) j["source"] = c.source;
    // Losing a rejection line is not worth stopping the run for.
    (void)AppendLine(rejected_path_, j.dump());
    Log("attempt " + std::to_string(attempt) + " rejected (" + stage + "): " + FirstLine(reason, 200));
  }

  const SynthOptions& o_;
  Judge* judge_;
  std::mt19937_64 rng_;
  SynthResult r_;
  std::string dir_, staging_, rejected_path_, manifest_path_, template_;
  std::vector<std::pair<std::string, std::string>> examples_;  // file, source
  std::map<std::string, std::string> sources_;     // normalised-source hash -> file
  std::map<std::string, std::string> signatures_;  // signature -> file
  long long next_id_ = 1;
};

}  // namespace

std::string SynthResult::Summary(const SynthOptions& o) const {
  std::string s = "kept " + std::to_string(kept) + " of " + std::to_string(o.count) + " tasks in " + o.out_dir + " (" +
                  std::to_string(attempts) + " attempts, " + std::to_string(rejected) + " rejected";
  std::string why;
  for (const auto& [stage, n] : rejections) why += (why.empty() ? ": " : ", ") + std::to_string(n) + " " + stage;
  return s + why + "; seed " + std::to_string(o.seed) + ")";
}

SynthResult Synthesize(const SynthOptions& o, Judge* judge) { return Synthesizer(o, judge).Run(); }

std::string DefaultExamplesDir() {
  std::string src = SourceDir();
  std::string kb = src + "/../shared/datasets/kernelbench/level1";
  std::error_code ec;
  if (fs::is_directory(kb, ec)) return fs::weakly_canonical(kb, ec).string();
  return src + "/examples/tasks";
}

std::string TaskNameFromOps(const std::vector<std::string>& ops) {
  std::string name;
  int n = 0;
  for (const auto& op : ops) {
    std::string k;
    for (char ch : op.substr(0, op.find('('))) {
      if (std::isalnum(static_cast<unsigned char>(ch))) k += ch;
    }
    if (k.empty()) continue;
    if (++n > 6) break;
    name += (name.empty() ? "" : "_") + k;
  }
  return name.empty() ? "Task" : name;
}

}  // namespace ax::adapt
