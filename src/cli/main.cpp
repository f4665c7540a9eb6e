// adaexplore: turns slow PyTorch operators into fast, verified GPU kernels.
//
// Exit codes: 0 a verdict (or listing) was produced, whatever it says;
// 1 a command ran but found problems (e.g. invalid tasks in `tasks`);
// 2 bad usage or unreadable input; 3 the judge's environment is broken
// (no Python with torch, no GPU where one was asked for).
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <ctime>
#include <atomic>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <map>
#include <sstream>

#include "common/util.h"
#include "judge/judge.h"
#include "llm/factory.h"
#include "llm/recorder.h"
#include "search/proposer.h"
#include "search/run_store.h"
#include "search/search.h"
#include "search/skill_rules.h"
#include "adapt/memory.h"
#include "adapt/rule_extractor.h"
#include "builtin/builtin_proposer.h"
#include "cli/memory_cmd.h"
#include "cli/report_cmd.h"
#include "cli/synth_cmd.h"
#include "cli/judge_flags.h"
#include "cli/worker_cmd.h"

namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitEnvironment = 3;
constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

// SIGINT / SIGTERM during optimize, bench and adapt: the first stops the run
// gracefully (no new steps or tasks; the candidates being judged finish; the
// store and summary.json are written, so --resume continues); a second one
// ends the process at once.
std::atomic<int> g_interrupts{0};

extern "C" void OnInterrupt(int sig) {
  if (g_interrupts.fetch_add(1) >= 1) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  static const char kMsg[] =
      "adaexplore: interrupted: finishing the candidates being judged, then saving the run (interrupt again to stop "
      "now)\n";
  ssize_t w = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)w;
}

bool Interrupted() { return g_interrupts.load() > 0; }

using ax::cli::CommonFlags;
using ax::cli::Fail;
using ax::cli::JudgeFlags;

// Checks the flags into options; prints why and returns false on bad usage.
bool CheckOptions(CommonFlags* c, const JudgeFlags& f, ax::JudgeOptions* o) {
  ax::Status s = ax::cli::ToOptions(c, f, o);
  if (!s.ok()) Fail(s.message());
  return s.ok();
}

// The judge the flags name; prints why and returns null when it cannot start.
std::unique_ptr<ax::Judge> MakeJudgeOrFail(const CommonFlags& c, int workers, int max_spawns) {
  std::unique_ptr<ax::Judge> j;
  ax::Status s = ax::cli::MakeJudge(c, workers, max_spawns, &j);
  if (!s.ok()) Fail(s.message());
  return j;
}

// One task spec that must name exactly one task.
bool OneTask(const std::string& spec, ax::TaskRef* out) {
  std::vector<ax::TaskRef> found;
  if (ax::Status s = ax::ResolveTasks(spec, &found); !s.ok()) {
    Fail(s.message());
    return false;
  }
  if (found.size() != 1) {
    Fail("expected one task; " + spec + " names " + std::to_string(found.size()));
    return false;
  }
  *out = found[0];
  return true;
}

// batch: many (task, candidate) pairs through one pool; verdicts as JSON
// lines on stdout, throughput on stderr.
int RunBatch(const std::string& manifest, CommonFlags& c, const JudgeFlags& f, int jobs) {
  ax::JudgeOptions o;
  if (!CheckOptions(&c, f, &o)) return kExitBadInput;
  auto text = ax::ReadFile(manifest);
  if (!text) {
    Fail("cannot read manifest: " + manifest);
    return kExitBadInput;
  }
  std::vector<ax::EvalRequest> reqs;
  std::map<std::string, ax::TaskRef> tasks;
  std::stringstream ss(*text);
  std::string line;
  int lineno = 0;
  std::filesystem::path base = std::filesystem::absolute(manifest).parent_path();
  auto rel = [&](const std::string& p) { return p.empty() || p[0] == '/' ? p : (base / p).string(); };
  while (std::getline(ss, line)) {
    ++lineno;
    if (ax::Trim(line).empty() || ax::Trim(line)[0] == '#') continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
      Fail(manifest + ":" + std::to_string(lineno) + ": not a JSON object");
      return kExitBadInput;
    }
    if (!j.is_object() || !j.contains("task") || !j.contains("candidate")) {
      Fail(manifest + ":" + std::to_string(lineno) + ": needs \"task\" and \"candidate\"");
      return kExitBadInput;
    }
    std::string spec = j["task"].get<std::string>();
    if (spec.rfind("kernelbench:", 0) != 0) spec = rel(spec);
    if (!tasks.count(spec)) {
      ax::TaskRef t;
      if (!OneTask(spec, &t)) return kExitBadInput;
      tasks[spec] = t;
    }
    std::string cand = rel(j["candidate"].get<std::string>());
    auto source = ax::ReadFile(cand);
    if (!source) {
      Fail(manifest + ":" + std::to_string(lineno) + ": cannot read candidate " + cand);
      return kExitBadInput;
    }
    ax::EvalRequest r;
    r.task = tasks[spec];
    r.candidate_path = cand;
    r.candidate_source = *source;
    r.options = o;
    reqs.push_back(std::move(r));
  }
  auto pool = MakeJudgeOrFail(c, std::max(1, jobs), -1);
  if (!pool) return kExitEnvironment;
  // Task checks first (a broken task stops the batch before any candidate
  // runs); baselines are measured inside the pool as candidates need them,
  // overlapped with other candidates' work, so the candidates' wall time
  // below includes them.
  double t0 = ax::NowSeconds();
  size_t done = 0;
  for (auto& [spec, t] : tasks) {
    ax::TaskInfo info;
    double tt = ax::NowSeconds();
    ax::Status s = pool->CheckTask(t, o, &info);
    if (!s.ok()) {
      Fail(s.message());
      return info.error.empty() ? kExitEnvironment : kExitBadInput;
    }
    std::fprintf(stderr, "batch: task %zu/%zu %s checked in %.1f s\n", ++done, tasks.size(), t.name.c_str(),
                 ax::NowSeconds() - tt);
  }
  double t_tasks = ax::NowSeconds() - t0;
  std::vector<std::future<ax::EvalResult>> futs;
  double t1 = ax::NowSeconds();
  for (auto& r : reqs) futs.push_back(pool->Submit(r));
  std::map<std::string, int> hist;
  int failures = 0;
  for (auto& fu : futs) {
    ax::EvalResult r = fu.get();
    if (!r.status.ok()) {
      ++failures;
      std::cout << nlohmann::json{{"status", "judge_error"}, {"error", r.status.message()}}.dump() << std::endl;
      continue;
    }
    hist[r.verdict.status]++;
    std::cout << r.verdict.ToJson().dump() << std::endl;
  }
  double wall = ax::NowSeconds() - t1;
  std::string h;
  for (auto& [k, n] : hist) h += (h.empty() ? "" : ", ") + k + " " + std::to_string(n);
  std::fprintf(stderr, "batch: %zu candidates in %.1f s (%.1f per minute, baselines included) on %s; task checks %.1f s; %s%s\n",
               reqs.size(), wall, wall > 0 ? 60.0 * reqs.size() / wall : 0.0, ax::cli::JudgeWhere(c).c_str(), t_tasks, h.c_str(),
               failures ? (", judge errors " + std::to_string(failures)).c_str() : "");
  // Every candidate's line is out; a judge that failed some is still exit 3.
  return failures ? kExitEnvironment : 0;
}


// ---- optimize and bench ----------------------------------------------------

struct SearchFlags {
  std::string proposer;
  int steps = 20;
  std::string method = "mcts";
  std::string memory;
  std::string out;
  bool resume = false;
  long long seed = -1;
  std::string record;
  std::string backend = "triton";
  long long max_tokens = 0;
  double max_dollars = 0;
  double max_wall_s = 0;
  std::string prices;
  int jobs = 1;
  int llm_max_tokens = 8192;
  std::string hardware = "an NVIDIA H200 GPU (Hopper, sm_90, 132 SMs, 141 GB HBM3e at 4.8 TB/s)";
  ax::search::SearchParams params;
  std::string reward_mapping = "linear-clipped";
  int retime_top = 3;
};

void AddSearchFlags(CLI::App* cmd, SearchFlags* f) {
  cmd->add_option("--proposer", f->proposer, "openai:MODEL, azure:DEPLOYMENT, anthropic:MODEL, compat:MODEL@URL, replay:FILE or builtin")
      ->required();
  cmd->add_option("--steps", f->steps, "candidates to propose per task (default 20)");
  cmd->add_option("--search", f->method, "mcts (default), ir (iterative refinement) or bon (best-of-N)");
  cmd->add_option("--memory", f->memory, "skill memory (.txt: rule||score, .json: with examples) whose rules go into prompts, or none");
  cmd->add_flag("--resume", f->resume, "continue the run recorded in --out");
  cmd->add_option("--seed", f->seed, "search seed (default: random, recorded in the run)");
  cmd->add_option("--record", f->record, "also write every LLM call to FILE (a replay:FILE recording)");
  cmd->add_option("--backend", f->backend, "triton (default) or cuda kernels");
  cmd->add_option("--max-tokens", f->max_tokens, "token budget for the whole run (input + output)");
  cmd->add_option("--max-dollars", f->max_dollars, "dollar budget for the whole run (needs --prices)");
  cmd->add_option("--max-wall", f->max_wall_s, "wall-time budget per task, seconds");
  cmd->add_option("--prices", f->prices, "price table JSON (see docs/llm.md)");
  cmd->add_option("--llm-max-tokens", f->llm_max_tokens, "output token limit per LLM call (default 8192)");
  cmd->add_option("--hardware", f->hardware, "hardware description for the prompts");
  cmd->add_option("--alpha", f->params.alpha, "node value Q = alpha * max reward + (1 - alpha) * mean (default 0.5)");
  cmd->add_option("--c", f->params.c, "UCT exploration weight (default 0.3)");
  cmd->add_option("--expand-ratio", f->params.expand_ratio, "the expand action's exploration weight / c (default 1.0)");
  cmd->add_option("--small-step-limit", f->params.small_step_limit, "small-step children before a node takes large steps (default 2)");
  cmd->add_option("--p-large", f->params.p_large, "chance of a large step below that limit (default 0.2)");
  cmd->add_option("--pool-size", f->params.pool_size, "kernels shown to a large step (default 5)");
  cmd->add_option("--path-window", f->params.path_window, "recent nodes shown to the reviser (default 5)");
  cmd->add_option("--reward", f->reward_mapping, "speedup-to-reward mapping: linear-clipped (default) or log-clipped");
  cmd->add_option("--retime-top", f->retime_top, "best candidates re-timed at the end (default 3)");
}

std::string Timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

int RunSearch(const std::vector<ax::TaskRef>& tasks, CommonFlags& c, const JudgeFlags& jf, SearchFlags& sf,
              bool bench, bool adapt = false) {
  namespace fs = std::filesystem;
  ax::JudgeOptions jo;
  if (!CheckOptions(&c, jf, &jo)) return kExitBadInput;
  if (sf.method != "mcts" && sf.method != "ir" && sf.method != "bon") {
    Fail("bad --search '" + sf.method + "' (mcts, ir or bon)");
    return kExitBadInput;
  }
  if (sf.backend != "triton" && sf.backend != "cuda") {
    Fail("bad --backend '" + sf.backend + "' (triton or cuda)");
    return kExitBadInput;
  }
  if (auto m = ax::search::ParseRewardMapping(sf.reward_mapping)) {
    sf.params.reward.mapping = *m;
  } else {
    Fail("bad --reward '" + sf.reward_mapping + "' (linear-clipped or log-clipped)");
    return kExitBadInput;
  }
  if (ax::Status s = sf.params.Validate(); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  if (sf.steps < 1) {
    Fail("--steps must be at least 1");
    return kExitBadInput;
  }
  const bool builtin = sf.proposer == "builtin";
  if (builtin && adapt) {
    Fail("adapt learns from an LLM's mistakes: it needs an LLM proposer, not builtin");
    return kExitBadInput;
  }
  std::string out = sf.out.empty() ? "runs/" + (bench ? std::string("bench") : tasks[0].name) + "-" + Timestamp() : sf.out;
  const std::string db = out + "/run.sqlite";
  std::error_code ec;
  if (fs::exists(db, ec) && !sf.resume) {
    Fail(out + " already holds a run; pass --resume to continue it, or choose another --out");
    return kExitBadInput;
  }
  if (sf.resume && !fs::exists(db, ec)) {
    Fail("nothing to resume in " + out + " (no run.sqlite)");
    return kExitBadInput;
  }
  fs::create_directories(out, ec);
  if (ec) {
    Fail("cannot create " + out + ": " + ec.message());
    return kExitBadInput;
  }
  std::unique_ptr<ax::search::RunStore> store;
  if (ax::Status s = ax::search::RunStore::Open(db, &store); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  // The seed is part of the run: a resumed run uses the recorded one.
  unsigned long long seed = sf.seed >= 0 ? static_cast<unsigned long long>(sf.seed) : std::random_device{}();
  if (auto stored = store->GetMeta("seed"); stored && sf.resume) seed = std::stoull(*stored);
  // The step budget the stored run had: its finished tasks are final under
  // the same budget (a larger one continues them).
  int stored_steps = -1;
  if (sf.resume) {
    if (auto c = store->GetMeta("config")) {
      try {
        stored_steps = nlohmann::json::parse(*c).value("steps", -1);
      } catch (...) {
      }
    }
  }
  nlohmann::json config = {{"proposer", sf.proposer}, {"steps", sf.steps}, {"search", sf.method},
                           {"seed", seed},           {"device", ax::cli::JudgeWhere(c)}, {"tolerance", jo.tolerance},
                           {"backend", sf.backend},  {"memory", sf.memory}, {"params", sf.params.ToJson()},
                           {"tasks", nlohmann::json::array()}};
  for (const auto& t : tasks) config["tasks"].push_back({{"name", t.name}, {"path", t.path}, {"hash", t.hash}});
  store->PutMeta("seed", std::to_string(seed));
  store->PutMeta("config", config.dump());

  // The skill memory: its best rules go into every prompt; adapt also learns
  // new ones from the run's failures and keeps the file up to date.
  ax::adapt::Memory memory;
  const bool use_memory = !sf.memory.empty() && sf.memory != "none";
  if (use_memory) {
    if (ax::Status s = memory.Load(sf.memory, /*missing_ok=*/adapt); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
  }
  ax::search::Prompts prompts;
  if (ax::Status s = ax::search::Prompts::Load("", &prompts); !s.ok()) {
    Fail(s.message());
    return kExitEnvironment;
  }
  ax::llm::PriceTable prices;
  if (!sf.prices.empty()) {
    if (ax::Status s = ax::llm::PriceTable::Load(sf.prices, &prices); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
  }
  ax::llm::Budget budget;
  budget.max_tokens = sf.max_tokens;
  budget.max_usd = sf.max_dollars;
  ax::llm::RunServices services;
  services.accountant = std::make_shared<ax::llm::Accountant>(prices, budget);
  if (!sf.record.empty()) {
    std::unique_ptr<ax::llm::JsonlRecorder> rec;
    if (ax::Status s = ax::llm::JsonlRecorder::Open(sf.record, sf.resume, &rec); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    services.sink = std::move(rec);
  }
  ax::llm::ClientConfig ccfg;
  std::unique_ptr<ax::llm::LlmClient> client;
  if (!builtin) {
    if (ax::Status s = ax::llm::MakeClient(sf.proposer, ccfg, services, &client); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
  }
  std::unique_ptr<ax::adapt::RuleExtractor> extractor;
  if (adapt) {
    if (ax::Status s = memory.SetLlm(client.get()); !s.ok()) {
      Fail(s.message());
      return kExitEnvironment;
    }
    if (ax::Status s = ax::adapt::RuleExtractor::Create(client.get(), {}, &extractor); !s.ok()) {
      Fail(s.message());
      return kExitEnvironment;
    }
  }
  std::atomic<int> rules_new{0}, rules_repeat{0};
  std::mutex save_mu;
  std::string save_error;
  auto pool = MakeJudgeOrFail(c, std::max(1, sf.jobs), -1);
  if (!pool) return kExitEnvironment;
  ax::search::SearchConfig scfg;
  scfg.method = sf.method;
  scfg.steps = sf.steps;
  scfg.backend = sf.backend;
  scfg.hardware = jo.cuda() ? sf.hardware : "the CPU (Triton's interpreter; timings are CPU figures)";
  scfg.rules = use_memory ? memory.Select() : std::vector<std::string>{};
  scfg.max_wall_s = sf.max_wall_s;
  scfg.params = sf.params;
  scfg.retime_top = sf.retime_top;
  std::mutex print_mu;
  auto accountant = services.accountant;
  auto progress = [&](const std::string& task, const std::string& line) {
    auto tot = accountant->run();
    std::lock_guard<std::mutex> lock(print_mu);
    std::fprintf(stderr, "[%s] %s | run: %lld calls, %lld tokens, $%.4f\n", task.c_str(), line.c_str(),
                 static_cast<long long>(tot.calls), static_cast<long long>(tot.input_tokens + tot.output_tokens),
                 tot.cost_usd);
  };
  std::vector<ax::search::TaskResult> results(tasks.size());
  std::vector<ax::Status> statuses(tasks.size());
  std::atomic<size_t> next{0};
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  auto worker = [&] {
    while (true) {
      size_t i = next++;
      if (i >= tasks.size()) return;
      const auto& t = tasks[i];
      if (Interrupted()) {
        results[i].task = t.name;
        results[i].status = "stopped: interrupted";
        continue;
      }
      // A resumed run does not redo a task that finished with this budget
      // (its search would replay from the store, but the final re-timing
      // of its best candidates would run again).
      if (sf.resume) {
        auto stored = store->GetTask(t.name);
        ax::search::TaskResult done;
        if (stored && stored->contains("summary") &&
            ax::search::TaskResult::FromStored((*stored)["summary"], &done) &&
            (done.steps_done >= sf.steps || stored_steps == sf.steps)) {
          results[i] = done;
          progress(t.name, "finished in the stored run (" + done.status + ", " + std::to_string(done.steps_done) +
                               " steps): not run again");
          continue;
        }
      }
      ax::search::SearchConfig cfg = scfg;
      // Each task's search draws from its own stream of the run's seed.
      cfg.seed = seed ^ (std::hash<std::string>{}(t.name) * 0x9E3779B97F4A7C15ULL);
      ax::search::LlmCaller caller(client.get(), store.get(), t.name, sf.llm_max_tokens);
      std::unique_ptr<ax::search::Proposer> proposer;
      if (builtin) {
        if (ax::Status s = ax::builtin::MakeBuiltinProposer(pool.get(), t, jo, &proposer); !s.ok()) {
          statuses[i] = s;
          results[i].task = t.name;
          results[i].status = "stopped: " + s.message();
          continue;
        }
      } else {
        proposer = std::make_unique<ax::search::LlmProposer>(&prompts, &caller);
      }
      ax::search::TaskSearch search(t, pool.get(), jo, proposer.get(), store.get(), cfg, progress, [&] {
        return Interrupted() ? ax::Status::Error("interrupted") : accountant->CheckBudget();
      });
      if (use_memory) search.SetRulesProvider([&] { return memory.Select(); });
      if (adapt) {
        search.SetOnJudged([&, name = t.name](const std::string& source, const ax::search::Outcome& o) {
          if (o.correct) return;
          ax::adapt::Extraction ex = extractor->Extract({name, source, o.status, o.error});
          if (ex.outcome != ax::adapt::ExtractOutcome::kRule) return;
          ax::adapt::AddResult added =
              memory.Add(ex.rule, {name, ax::adapt::ErrorExcerpt(o.error, 300), static_cast<int64_t>(std::time(nullptr))});
          (added.match == ax::adapt::Match::kNew ? rules_new : rules_repeat)++;
          progress(name, "rule (" + std::string(ax::adapt::MatchName(added.match)) + ", score " +
                             std::to_string(static_cast<int>(added.score)) + "): " + added.rule);
          if (ax::Status s = memory.SaveIfChanged(sf.memory); !s.ok()) {
            std::lock_guard<std::mutex> lock(save_mu);
            save_error = s.message();
          }
        });
      }
      std::string dir = bench ? out + "/" + t.name : out;
      statuses[i] = search.Run(dir, &results[i]);
    }
  };
  std::vector<std::thread> threads;
  // --jobs is per device: every device of the pool (or of the workers
  // serving the broker's stream) gets that many tasks.
  int n = bench ? std::max(1, sf.jobs) * std::max(1, pool->Devices()) : 1;
  for (int k = 0; k < n; ++k) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  nlohmann::json summary = nlohmann::json::array();
  int failures = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const auto& r = results[i];
    summary.push_back(r.ToJson());
    std::string line = r.task + "  " + r.status;
    if (r.best_node >= 0) {
      for (const auto& [k, sp] : r.best.speedup) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "  %.3fx vs %s", sp, k.c_str());
        line += buf;
      }
      line += "  (node " + std::to_string(r.best_node) + ")";
    }
    line += "  steps " + std::to_string(r.steps_done) + ", judged " + std::to_string(r.judged) + ", LLM calls " +
            std::to_string(r.llm_calls) + (r.llm_replayed ? " (" + std::to_string(r.llm_replayed) + " from the store)" : "");
    std::cout << line << std::endl;
    if (!statuses[i].ok() && !(Interrupted() && statuses[i].message() == "interrupted")) {
      ++failures;
      Fail(r.task + ": " + statuses[i].message());
    }
  }
  int first_ok = 0;
  for (const auto& r : results) first_ok += r.first_correct ? 1 : 0;
  if (!tasks.empty()) {
    std::printf("pass@1 (first proposal correct): %d/%zu = %.3f  (memory: %s)\n", first_ok, tasks.size(),
                static_cast<double>(first_ok) / tasks.size(), sf.memory.empty() ? "none" : sf.memory.c_str());
  }
  if (adapt) {
    ax::Status s = memory.Save(sf.memory);
    if (!s.ok()) {
      Fail(s.message());
      ++failures;
    } else if (!save_error.empty()) {
      Fail("saving the memory failed during the run (it is saved now): " + save_error);
    }
    auto counts = extractor->counts();
    std::printf("memory: %s holds %zu rules; this run added %d new and counted %d repeats (%lld extraction calls, "
                "%lld infrastructure failures skipped)\n",
                sf.memory.c_str(), memory.size(), rules_new.load(), rules_repeat.load(),
                static_cast<long long>(counts.calls), static_cast<long long>(counts.skipped_infra));
  }
  auto tot = accountant->run();
  nlohmann::json run = {{"tasks", summary},
                        {"pass_at_1", tasks.empty() ? 0.0 : static_cast<double>(first_ok) / tasks.size()},
                        {"llm", {{"calls", tot.calls}, {"input_tokens", tot.input_tokens},
                                 {"output_tokens", tot.output_tokens}, {"cost_usd", tot.cost_usd}}},
                        {"out", out}};
  ax::WriteFile(out + "/summary.json", run.dump(2));
  std::fprintf(stderr, "run: %s (%lld LLM calls, %lld tokens, $%.4f)\n", out.c_str(),
               static_cast<long long>(tot.calls), static_cast<long long>(tot.input_tokens + tot.output_tokens),
               tot.cost_usd);
  if (Interrupted()) {
    Fail("interrupted: the run is saved in " + out + " (--resume continues it)");
    return kExitInterrupted;
  }
  return failures ? kExitEnvironment : 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{"adaexplore: fast, verified GPU kernels for PyTorch operators"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "adaexplore 0.1.0");

  // ---- eval ----
  CLI::App* eval = app.add_subcommand("eval", "judge one candidate kernel against a KernelBench task");
  CommonFlags ef;
  JudgeFlags ej;
  std::string task_spec, cand_path;
  bool as_json = false;
  eval->add_option("TASK", task_spec, "task file, KernelBench levelN/ID, or kernelbench:ROOT:LEVEL:ID")->required();
  eval->add_option("CANDIDATE", cand_path, "candidate file defining ModelNew")->required();
  ax::cli::AddCommon(eval, &ef);
  ax::cli::AddJudgeFlags(eval, &ej);
  eval->add_flag("--json", as_json, "print one JSON object (the last line)");

  // ---- batch ----
  CLI::App* batch = app.add_subcommand("batch", "judge many candidates through one judge pool");
  CommonFlags bf;
  JudgeFlags bj;
  std::string manifest;
  int jobs = 2;
  batch->add_option("MANIFEST", manifest, "JSON lines: {\"task\": SPEC, \"candidate\": FILE} (paths relative to the manifest)")
      ->required();
  ax::cli::AddCommon(batch, &bf);
  ax::cli::AddJudgeFlags(batch, &bj);
  batch->add_option("--jobs", jobs, "candidates in flight per device (default 2)");

  // ---- optimize ----
  CLI::App* optimize = app.add_subcommand("optimize", "search for the fastest correct kernel of one task");
  CommonFlags of;
  JudgeFlags oj;
  SearchFlags os;
  std::string opt_task;
  optimize->add_option("TASK", opt_task, "task file, KernelBench levelN/ID, or kernelbench:ROOT:LEVEL:ID")->required();
  ax::cli::AddCommon(optimize, &of);
  ax::cli::AddJudgeFlags(optimize, &oj, "--judge-seed");
  AddSearchFlags(optimize, &os);
  optimize->add_option("--out", os.out, "run folder (default runs/TASK-TIMESTAMP): best.py, run.sqlite, summary.json");

  // ---- bench ----
  CLI::App* benchc = app.add_subcommand("bench", "optimize many tasks, sharing one judge pool and one LLM budget");
  CommonFlags bnf;
  JudgeFlags bnj;
  SearchFlags bns;
  std::string bench_spec;
  benchc->add_option("TASKS", bench_spec, "task folder, file, levelN/ID or kernelbench:ROOT:LEVEL:ID")->required();
  ax::cli::AddCommon(benchc, &bnf);
  ax::cli::AddJudgeFlags(benchc, &bnj, "--judge-seed");
  AddSearchFlags(benchc, &bns);
  benchc->add_option("--out", bns.out, "run folder: one sub-folder per task, run.sqlite, summary.json")->required();
  benchc->add_option("--jobs", bns.jobs, "tasks searched in parallel (default 1)");

  // ---- adapt ----
  CLI::App* adaptc = app.add_subcommand("adapt", "run the agent over (synthesised) tasks and learn rules from its failures");
  CommonFlags adf;
  JudgeFlags adj;
  SearchFlags ads;
  std::string adapt_tasks;
  adaptc->add_option("--tasks", adapt_tasks, "task folder (e.g. from adaexplore synth)")->required();
  ax::cli::AddCommon(adaptc, &adf);
  ax::cli::AddJudgeFlags(adaptc, &adj, "--judge-seed");
  AddSearchFlags(adaptc, &ads);
  adaptc->get_option("--memory")->required()->description("the memory to learn into (.txt: rule||score, .json: with examples); created if missing");
  adaptc->add_option("--out", ads.out, "run folder (default runs/adapt-TIMESTAMP)");
  adaptc->add_option("--jobs", ads.jobs, "tasks in parallel (default 1)");

  // ---- tasks ----
  CLI::App* tasks = app.add_subcommand("tasks", "load and validate tasks: builds, runs, output, degenerate");
  CommonFlags tf;
  std::string tasks_spec, tasks_tol = "strict";
  bool tasks_json = false;
  tasks->add_option("SPEC", tasks_spec, "task file, folder, levelN/ID or kernelbench:ROOT:LEVEL:ID")->required();
  ax::cli::AddCommon(tasks, &tf);
  tasks->add_option("--tolerance", tasks_tol, "tolerance used for the all-zero degeneracy check");
  tasks->add_flag("--json", tasks_json, "one JSON object per task");

  ax::cli::ReportFlags report_flags;
  CLI::App* report_cmd = nullptr;
  ax::cli::RegisterReportCommand(app, &report_flags, &report_cmd);
  ax::cli::MemoryFlags memory_flags;
  CLI::App* memory_cmd = nullptr;
  ax::cli::RegisterMemoryCommand(app, &memory_flags, &memory_cmd);
  ax::cli::SynthFlags synth_flags;
  CLI::App* synth_cmd = nullptr;
  ax::cli::RegisterSynthCommand(app, &synth_flags, &synth_cmd);
  ax::cli::WorkerFlags worker_flags;
  CLI::App* worker_cmd = nullptr;
  CLI::App* status_cmd = nullptr;
  ax::cli::RegisterWorkerCommands(app, &worker_flags, &worker_cmd, &status_cmd);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }

  if (*report_cmd) return ax::cli::RunReportCommand(report_flags);
  if (*memory_cmd) return ax::cli::RunMemoryCommand(memory_flags);
  if (*synth_cmd) return ax::cli::RunSynthCommand(synth_flags);
  if (*worker_cmd) return ax::cli::RunWorkerCommand(worker_flags);
  if (*status_cmd) return ax::cli::RunJudgeStatusCommand(worker_flags);

  if (*eval) {
    ax::EvalRequest req;
    if (!CheckOptions(&ef, ej, &req.options)) return kExitBadInput;
    if (!OneTask(task_spec, &req.task)) return kExitBadInput;
    auto source = ax::ReadFile(cand_path);
    if (!source) {
      Fail("cannot read candidate file: " + cand_path);
      return kExitBadInput;
    }
    req.candidate_path = std::filesystem::absolute(cand_path).string();
    req.candidate_source = *source;
    auto pool = MakeJudgeOrFail(ef, 1, 1);
    if (!pool) return kExitEnvironment;
    ax::EvalResult r = pool->Evaluate(req);
    if (!r.status.ok()) {
      Fail(r.status.message());
      return r.bad_input ? kExitBadInput : kExitEnvironment;
    }
    if (as_json) {
      std::cout << r.verdict.ToJson().dump() << std::endl;
    } else {
      std::cout << r.verdict.ToText();
    }
    return 0;
  }

  if (*batch) return RunBatch(manifest, bf, bj, jobs);

  if (*optimize) {
    ax::TaskRef t;
    if (!OneTask(opt_task, &t)) return kExitBadInput;
    return RunSearch({t}, of, oj, os, false);
  }

  if (*adaptc) {
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(adapt_tasks, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    if (ads.memory == "none") {
      Fail("adapt needs a --memory file to learn into");
      return kExitBadInput;
    }
    if (ads.out.empty()) ads.out = "runs/adapt-" + Timestamp();
    return RunSearch(found, adf, adj, ads, true, true);
  }

  if (*benchc) {
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(bench_spec, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    return RunSearch(found, bnf, bnj, bns, true);
  }

  if (*tasks) {
    ax::JudgeOptions o;
    JudgeFlags tj;
    tj.tolerance = tasks_tol;
    if (!CheckOptions(&tf, tj, &o)) return kExitBadInput;
    std::vector<ax::TaskRef> found;
    if (ax::Status s = ax::ResolveTasks(tasks_spec, &found); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    auto pool = MakeJudgeOrFail(tf, 1, 0);
    if (!pool) return kExitEnvironment;
    int invalid = 0;
    for (const auto& t : found) {
      ax::TaskInfo info;
      ax::Status s = pool->CheckTask(t, o, &info);
      if (!s.ok() && info.error.empty()) {
        Fail(s.message());
        return kExitEnvironment;
      }
      if (!info.ok) ++invalid;
      nlohmann::json j = {{"task", t.name}, {"path", t.path}, {"hash", t.hash}, {"ok", info.ok}};
      if (info.ok) {
        j["outputs"] = nlohmann::json::parse(info.outputs_json);
        j["degenerate"] = info.degenerate;
      } else {
        j["error"] = info.error;
      }
      if (tasks_json) {
        std::cout << j.dump() << std::endl;
      } else if (info.ok) {
        std::string deg;
        for (auto& d : info.degenerate) deg += (deg.empty() ? "  DEGENERATE: " : ", ") + d;
        std::cout << t.name << "  " << t.hash.substr(0, 12) << "  " << j["outputs"].dump() << deg << std::endl;
      } else {
        std::cout << t.name << "  INVALID: " << info.error << std::endl;
      }
    }
    return invalid ? 1 : 0;
  }
  return 0;
}
