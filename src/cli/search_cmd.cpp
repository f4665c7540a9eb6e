#include "cli/search_cmd.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "adapt/memory.h"
#include "adapt/rule_extractor.h"
#include "builtin/builtin_proposer.h"
#include "cli/cli_support.h"
#include "cli/interrupt.h"
#include "common/util.h"
#include "llm/factory.h"
#include "llm/recorder.h"
#include "search/proposer.h"
#include "search/run_store.h"
#include "search/skill_rules.h"

namespace ax::cli {

namespace {

// One task's main proposer, watched for the provider's rejection of the run
// (RejectedByProvider): the first one is reported to `on_reject`, which makes
// the budget check stop every other task before its next call.
class RejectionWatch : public ax::search::Proposer {
 public:
  RejectionWatch(ax::search::Proposer* inner, std::function<void(const ax::Status&)> on_reject)
      : inner_(inner), on_reject_(std::move(on_reject)) {}
  ax::search::Proposal Propose(const ax::search::StepContext& ctx) override {
    ax::search::Proposal p = inner_->Propose(ctx);
    if (ax::search::RejectedByProvider(p.stop)) on_reject_(p.stop);
    return p;
  }
  std::pair<int, int> Calls() const override { return inner_->Calls(); }
  const char* Origin() const override { return inner_->Origin(); }

 private:
  ax::search::Proposer* inner_;
  std::function<void(const ax::Status&)> on_reject_;
};

// The prompts' line about the device, from the judge's measured facts.
std::string HardwareLine(ax::Judge* judge, const ax::JudgeOptions& jo) {
  ax::DeviceFacts facts;
  const bool known = jo.cuda() && judge->Facts(jo, &facts).ok();
  return ax::HardwareLine(jo.cuda(), known ? &facts : nullptr);
}

}  // namespace

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
  cmd->add_option("--hardware", f->hardware, "the device as the prompts describe it (default: the judge's measured facts of the GPU)");
  cmd->add_option("--alpha", f->params.alpha, "node value Q = alpha * max reward + (1 - alpha) * mean (default 0.5)");
  cmd->add_option("--c", f->params.c, "UCT exploration weight (default 0.3)");
  cmd->add_option("--expand-ratio", f->params.expand_ratio, "the expand action's exploration weight / c (default 1.0)");
  cmd->add_option("--small-step-limit", f->params.small_step_limit, "small-step children before a node takes large steps (default 2)");
  cmd->add_option("--p-large", f->params.p_large, "chance of a large step below that limit (default 0.2)");
  cmd->add_option("--pool-size", f->params.pool_size, "kernels shown to a large step (default 5)");
  cmd->add_option("--path-window", f->params.path_window, "recent nodes shown to the reviser (default 5)");
  cmd->add_option("--reward", f->reward_mapping, "speedup-to-reward mapping: linear-clipped (default) or log-clipped");
  cmd->add_option("--retime-top", f->retime_top, "best candidates re-timed at the end (default 3)");
  cmd->add_option("--warm-start", f->warm_start,
                  "builtin: the builtin compiler's kernels seed the tree before the LLM's first step; none (default)");
  cmd->add_option("--warm-start-steps", f->warm_start_steps,
                  "steps of the warm start, counted against --steps (default: a third of --steps)");
}

int RunSearch(const std::vector<TaskRef>& tasks, CommonFlags& c, const JudgeFlags& jf, SearchFlags& sf, SearchMode mode,
              const SearchHooks& hooks, nlohmann::json* run_out) {
  const bool bench = mode != SearchMode::kOptimize;
  const bool adapt = mode == SearchMode::kAdapt;
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
  if (!sf.warm_start.empty() && sf.warm_start != "builtin" && sf.warm_start != "none") {
    Fail("bad --warm-start '" + sf.warm_start + "' (builtin or none)");
    return kExitBadInput;
  }
  if (builtin && sf.warm_start == "builtin") {
    Fail("--warm-start builtin seeds an LLM search; --proposer builtin has nothing to warm-start");
    return kExitBadInput;
  }
  if (sf.warm_start_steps < -1 || sf.warm_start_steps > sf.steps) {
    Fail("--warm-start-steps must be 0.." + std::to_string(sf.steps) + " (it counts against --steps)");
    return kExitBadInput;
  }
  if ((sf.warm_start == "none" || (sf.warm_start.empty() && !sf.resume)) && sf.warm_start_steps > 0) {
    Fail("--warm-start-steps needs --warm-start builtin");
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
  // The warm start is part of the run too: on --resume, flags not given
  // take the stored run's values, and given ones must agree with them (the
  // same warm start replays to the same tree).
  std::string warm_start = sf.warm_start;
  int warm_steps = sf.warm_start_steps;
  std::string stored_hardware;
  if (sf.resume) {
    if (auto c = store->GetMeta("config")) {
      nlohmann::json stored;
      try {
        stored = nlohmann::json::parse(*c);
      } catch (...) {
      }
      if (stored.is_object()) {
        stored_hardware = stored.value("hardware", std::string());
        // The precision is part of the run: its verdicts and baselines were
        // measured in it.
        const std::string sp = stored.value("precision", std::string("fp32"));
        if (!jf.precision.empty() && ax::PrecisionName(jo.precision) != sp) {
          Fail("--precision " + jf.precision + " differs from the stored run's (" + sp + ")");
          return kExitBadInput;
        }
        if (ax::Status s = ax::ParsePrecision(sp, &jo.precision); !s.ok()) {
          Fail("the stored run's precision: " + s.message());
          return kExitBadInput;
        }
        // So is the timing: its speedups were measured with it.
        const std::string st = stored.value("timing", std::string("host"));
        if (!jf.timing.empty() && ax::TimingModeName(jo.timing) != st) {
          Fail("--timing " + jf.timing + " differs from the stored run's (" + st + ")");
          return kExitBadInput;
        }
        if (ax::Status s = ax::ParseTimingMode(st, &jo.timing); !s.ok()) {
          Fail("the stored run's timing: " + s.message());
          return kExitBadInput;
        }
        const std::string sw = stored.value("warm_start", std::string("none"));
        const int ss = stored.value("warm_start_steps", 0);
        if (!warm_start.empty() && warm_start != sw) {
          Fail("--warm-start " + warm_start + " differs from the stored run's (" + sw + ")");
          return kExitBadInput;
        }
        warm_start = sw;
        if (sw == "builtin" && warm_steps >= 0 && warm_steps != ss) {
          Fail("--warm-start-steps " + std::to_string(warm_steps) + " differs from the stored run's (" +
               std::to_string(ss) + ")");
          return kExitBadInput;
        }
        if (sw == "builtin") warm_steps = ss;
      }
    }
  }
  if (warm_start.empty()) warm_start = "none";
  if (warm_start == "none") {
    if (warm_steps > 0) {
      Fail("--warm-start-steps needs --warm-start builtin");
      return kExitBadInput;
    }
    warm_steps = 0;
  } else if (warm_steps < 0) {
    warm_steps = sf.steps / 3;
  }
  const bool warm = warm_start == "builtin";
  nlohmann::json config = {{"proposer", sf.proposer}, {"steps", sf.steps}, {"search", sf.method},
                           {"warm_start", warm_start}, {"warm_start_steps", warm_steps},
                           {"seed", seed},           {"device", ax::cli::JudgeWhere(c)}, {"tolerance", jo.tolerance},
                           {"precision", ax::PrecisionName(jo.precision)},
                           {"timing", ax::TimingModeName(jo.timing)},
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
  // The builtin proposer writes its kernels itself: it needs no prompt files.
  ax::search::Prompts prompts;
  if (!builtin) {
    if (ax::Status s = ax::search::Prompts::Load("", &prompts); !s.ok()) {
      Fail(s.message());
      return kExitEnvironment;
    }
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
  // Measured before any task starts, while the device is idle: the prompts'
  // device line and the peaks of every verdict's roofline.
  const std::string measured = HardwareLine(pool.get(), jo);
  scfg.hardware = !sf.hardware.empty() ? sf.hardware : !stored_hardware.empty() ? stored_hardware : measured;
  if (!builtin) {  // what --resume asks the prompts with
    config["hardware"] = scfg.hardware;
    store->PutMeta("config", config.dump());
  }
  scfg.rules = use_memory ? memory.Select() : std::vector<std::string>{};
  scfg.max_wall_s = sf.max_wall_s;
  scfg.params = sf.params;
  scfg.retime_top = sf.retime_top;
  scfg.warm_start_steps = warm_steps;
  // The first rejection of the run by the LLM provider (401/403, 404, quota):
  // every task stops before its next call, and the run exits 2.
  std::mutex reject_mu;
  ax::Status rejected;
  auto on_reject = [&](const ax::Status& s) {
    std::lock_guard<std::mutex> lock(reject_mu);
    if (rejected.ok()) rejected = s;
  };
  std::mutex print_mu;
  auto accountant = services.accountant;
  auto progress = [&](const ax::search::Progress& p) {
    std::lock_guard<std::mutex> lock(print_mu);
    if (hooks.progress) {
      hooks.progress(p);
      return;
    }
    auto tot = accountant->run();
    std::fprintf(stderr, "[%s] %s | run: %lld calls, %lld tokens, $%.4f\n", p.task.c_str(), p.line.c_str(),
                 static_cast<long long>(tot.calls), static_cast<long long>(tot.input_tokens + tot.output_tokens),
                 tot.cost_usd);
  };
  // A line that is not a step (a task skipped on resume, a learned rule).
  auto note = [&](const std::string& task, const std::string& line) { progress({task, line, 0, sf.steps, std::nullopt}); };
  std::vector<ax::search::TaskResult> results(tasks.size());
  std::vector<ax::Status> statuses(tasks.size());
  std::atomic<size_t> next{0};
  InterruptScope interrupt_scope;
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
          note(t.name, "finished in the stored run (" + done.status + ", " + std::to_string(done.steps_done) +
                               " steps): not run again");
          continue;
        }
      }
      ax::search::SearchConfig cfg = scfg;
      // Each task's search draws from its own stream of the run's seed.
      cfg.seed = seed ^ (std::hash<std::string>{}(t.name) * 0x9E3779B97F4A7C15ULL);
      ax::search::LlmCaller caller(client.get(), store.get(), t.name, sf.llm_max_tokens);
      // The builtin compiler: the proposer itself (--proposer builtin) or the warm start.
      std::unique_ptr<ax::search::Proposer> proposer, warm_proposer;
      if (builtin || warm) {
        if (ax::Status s = ax::builtin::MakeBuiltinProposer(pool.get(), t, jo, builtin ? &proposer : &warm_proposer);
            !s.ok()) {
          statuses[i] = s;
          results[i].task = t.name;
          results[i].status = "stopped: " + s.message();
          continue;
        }
      }
      if (!builtin) proposer = std::make_unique<ax::search::LlmProposer>(&prompts, &caller);
      RejectionWatch watched(proposer.get(), on_reject);
      ax::search::TaskSearch search(t, pool.get(), jo, &watched, store.get(), cfg, progress, [&]() -> ax::Status {
        if (Interrupted()) return ax::Status::Error(ax::StatusCode::kCancelled, "interrupted");
        {
          std::lock_guard<std::mutex> lock(reject_mu);
          if (!rejected.ok()) return rejected;
        }
        return accountant->CheckBudget();
      });
      search.SetWarmStart(warm_proposer.get());
      if (use_memory) search.SetRulesProvider([&] { return memory.Select(); });
      if (adapt) {
        search.SetOnJudged([&, name = t.name](const std::string& source, const ax::search::Outcome& o) {
          if (o.correct) return;
          ax::adapt::Extraction ex = extractor->Extract({name, source, o.status, o.error});
          if (ex.outcome != ax::adapt::ExtractOutcome::kRule) return;
          ax::adapt::AddResult added =
              memory.Add(ex.rule, {name, ax::adapt::ErrorExcerpt(o.error, 300), static_cast<int64_t>(std::time(nullptr))});
          (added.match == ax::adapt::Match::kNew ? rules_new : rules_repeat)++;
          note(name, "rule (" + std::string(ax::adapt::MatchName(added.match)) + ", score " +
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
      line += "  (node " + std::to_string(r.best_node);
      if (warm) {
        line += ", from " + r.best_origin;
        if (r.best_refines_warm_start) line += ", refining a warm-start kernel";
      }
      line += ")";
    }
    line += "  steps " + std::to_string(r.steps_done);
    if (warm) line += " (" + std::to_string(r.warm_start_steps) + " warm-start)";
    line += ", judged " + std::to_string(r.judged) + ", LLM calls " +
            std::to_string(r.llm_calls) + (r.llm_replayed ? " (" + std::to_string(r.llm_replayed) + " from the store)" : "");
    if (hooks.print_results) std::cout << line << std::endl;
    if (!statuses[i].ok() && !(Interrupted() && statuses[i].message() == "interrupted")) {
      ++failures;
      Fail(r.task + ": " + statuses[i].message());
    }
  }
  int first_ok = 0;
  for (const auto& r : results) first_ok += r.first_correct ? 1 : 0;
  if (!tasks.empty() && hooks.print_results) {
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
                        {"precision", ax::PrecisionName(jo.precision)},
                        {"timing", ax::TimingModeName(jo.timing)},
                        {"out", out}};
  ax::WriteFile(out + "/summary.json", run.dump(2));
  if (run_out) *run_out = run;
  if (hooks.print_results) std::fprintf(stderr, "run: %s (%lld LLM calls, %lld tokens, $%.4f)\n", out.c_str(),
               static_cast<long long>(tot.calls), static_cast<long long>(tot.input_tokens + tot.output_tokens),
               tot.cost_usd);
  if (Interrupted()) {
    Fail("interrupted: the run is saved in " + out + " (--resume continues it)");
    return kExitInterrupted;
  }
  // A provider that rejects the key, the model or the account is the user's
  // setup to fix: exit 2 even when warm-start steps (or steps before a quota
  // ran out) were made; they are saved, and --resume continues the run.
  if (!rejected.ok()) {
    Fail("the LLM provider rejected the run (" + std::string(ax::StatusCodeName(rejected.code())) +
         "): " + rejected.message() + "; the run is saved in " + out + " (--resume continues it)");
    return kExitBadInput;
  }
  return failures ? kExitEnvironment : 0;
}

}  // namespace ax::cli
