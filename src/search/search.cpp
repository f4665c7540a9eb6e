#include "search/search.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "common/util.h"

namespace ax::search {

namespace {

std::string Excerpt(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n * 2 / 3) + "\n...\n" + s.substr(s.size() - n / 3);
}

}  // namespace

std::string VerdictLine(const Outcome& o) {
  char buf[160];
  if (o.correct) {
    std::snprintf(buf, sizeof buf, "correct, %.3fx vs eager PyTorch (%.4f ms)", o.speedup, o.runtime_ms);
    return buf;
  }
  std::string first = FirstLine(o.error, 200);
  return o.status + (first.empty() ? "" : ": " + first);
}

Outcome OutcomeOf(const Verdict& v) {
  Outcome o;
  o.status = v.status;
  o.correct = v.correct;
  auto it = v.speedup.find("eager");
  o.speedup = v.correct && it != v.speedup.end() ? it->second : (v.correct ? 1.0 : 0.0);
  o.runtime_ms = v.runtime_ms.value_or(0.0);
  o.error = Excerpt(v.error, 3000);
  o.flags = v.flags;
  if (v.profile) {
    o.profile = v.profile->Summary();
    for (const auto& k : v.profile->kernels) o.kernels.push_back({k.name, k.ms});
  }
  return o;
}

nlohmann::json TaskResult::ToJson() const {
  nlohmann::json j = {{"task", task},           {"status", status},     {"steps", steps_done},
                      {"best_node", best_node}, {"llm_calls", llm_calls}, {"llm_replayed", llm_replayed},
                      {"judged", judged},       {"judge_reused", judge_reused}, {"wall_s", wall_s},
                      {"first_correct", first_correct}};
  if (best_node >= 0) {
    j["runtime_ms"] = best.runtime_ms ? nlohmann::json(*best.runtime_ms) : nlohmann::json(nullptr);
    j["speedup"] = best.speedup;
    j["baseline_ms"] = best.baseline_ms;
    j["flags"] = best.flags;
    j["device"] = best.device;
    j["best_verdict"] = best.ToJson();
  }
  if (!retime_failures.empty()) j["retime_failures"] = retime_failures;
  j["warm_start_steps"] = warm_start_steps;
  if (!best_origin.empty()) {
    j["best_origin"] = best_origin;
    j["best_refines_warm_start"] = best_refines_warm_start;
  }
  if (!stop.ok()) j["stop_code"] = StatusCodeName(stop.code());
  return j;
}

bool TaskResult::FromStored(const nlohmann::json& j, TaskResult* out) {
  try {
    if (!j.is_object()) return false;
    TaskResult r;
    r.task = j.at("task").get<std::string>();
    r.status = j.at("status").get<std::string>();
    if (r.status != "found" && r.status != "none") return false;
    r.steps_done = j.value("steps", 0);
    r.best_node = j.value("best_node", -1);
    r.llm_calls = j.value("llm_calls", 0);
    r.llm_replayed = j.value("llm_replayed", 0);
    r.judged = j.value("judged", 0);
    r.judge_reused = j.value("judge_reused", 0);
    r.wall_s = j.value("wall_s", 0.0);
    r.first_correct = j.value("first_correct", false);
    r.warm_start_steps = j.value("warm_start_steps", 0);
    r.best_origin = j.value("best_origin", std::string());
    r.best_refines_warm_start = j.value("best_refines_warm_start", false);
    if (j.contains("retime_failures") && j["retime_failures"].is_array()) r.retime_failures = j["retime_failures"];
    if (r.best_node >= 0) {
      if (!j.contains("best_verdict")) return false;
      r.best = Verdict::FromJson(j["best_verdict"]);
    }
    *out = std::move(r);
    return true;
  } catch (...) {
    return false;
  }
}

TaskSearch::TaskSearch(TaskRef task, Judge* judge, JudgeOptions judge_options, Proposer* proposer, RunStore* store,
                       SearchConfig cfg, ProgressFn progress, std::function<Status()> budget_check)
    : task_(std::move(task)),
      judge_(judge),
      jopts_(std::move(judge_options)),
      proposer_(proposer),
      store_(store),
      cfg_(std::move(cfg)),
      progress_(std::move(progress)),
      budget_check_(std::move(budget_check)),
      tree_(cfg_.params),
      rng_(cfg_.seed) {}

ShownKernel TaskSearch::Show(int id) const {
  const Node& n = tree_.node(id);
  ShownKernel k;
  k.source = n.source;
  k.verdict = VerdictLine(n.outcome);
  if (!n.outcome.correct && !n.outcome.error.empty()) k.verdict += "\n\n```\n" + Excerpt(n.outcome.error, 1500) + "\n```";
  k.note = n.note;
  k.profile = n.outcome.profile;
  return k;
}

StepContext TaskSearch::Context(int id, bool large) {
  StepContext ctx;
  ctx.task = task_.name;
  ctx.large = large;
  PromptInputs& p = ctx.prompt;
  p.task_source = task_.source;
  p.backend = cfg_.backend;
  p.tolerance = jopts_.tolerance;
  Tolerance tol;
  if (LookupTolerance(jopts_.tolerance, &tol).ok()) {
    p.fp32_tol = tol.fp32_atol;
    p.half_tol = tol.half_atol;
  }
  if (jopts_.precision != Precision::kFp32) p.half_precision = PrecisionName(jopts_.precision);
  p.hardware = cfg_.hardware;
  p.rules = rules_provider_ ? rules_provider_() : cfg_.rules;
  if (large) {
    if (cfg_.method != "bon") {
      for (int k : tree_.DiversePool(id)) p.pool.push_back(Show(k));
    }
  } else {
    p.parent = Show(id);
    ctx.parent_plan = tree_.node(id).plan;
    ctx.parent_correct = tree_.node(id).outcome.correct;
    ctx.parent_kernels = tree_.node(id).outcome.kernels;
    ctx.parent_runtime_ms = tree_.node(id).outcome.runtime_ms;
    for (int k : tree_.RecentPath(id)) {
      if (k != root_) p.path.push_back(Show(k));
    }
  }
  return ctx;
}

int TaskSearch::SelectNode(bool* large) {
  const int root = root_;
  int node = root;
  if (cfg_.method == "bon") {
    *large = true;
    return root;
  }
  if (cfg_.method == "ir") {
    node = ir_tip_;
    *large = node == root;
  } else {
    node = tree_.Select(rng_).node;
    *large = tree_.ChooseStep(node, rng_) == StepKind::kLarge;
  }
  // Nothing to edit in a step that produced no kernel.
  if (tree_.node(node).source.empty()) *large = true;
  return node;
}

Outcome TaskSearch::Judge1(const std::string& source, Verdict* verdict, Status* fatal) {
  const std::string hash = Sha256Hex(source);
  if (store_) {
    if (auto hit = store_->GetVerdict(task_.name, hash)) {
      try {
        *verdict = Verdict::FromJson(nlohmann::json::parse(*hit));
        ++reused_;
        return OutcomeOf(*verdict);
      } catch (...) {
      }
    }
  }
  EvalRequest req;
  req.task = task_;
  req.candidate_path = "node";
  req.candidate_source = source;
  req.options = jopts_;
  EvalResult r = judge_->Evaluate(req);
  // A failure of the judge's own reference worker (killed, out of host
  // memory) says nothing about the candidate: judged once more (with a fresh
  // reference) before the step records it.
  if (r.status.ok() && r.verdict.HasFlag("reference_failed")) r = judge_->Evaluate(req);
  if (!r.status.ok()) {
    *fatal = r.status;
    return Outcome{};
  }
  ++judged_;
  *verdict = r.verdict;
  if (store_) {
    Status s = store_->PutVerdict(task_.name, hash, r.verdict.ToJson().dump());
    if (!s.ok()) *fatal = s;
  }
  return OutcomeOf(r.verdict);
}

std::optional<double> TaskSearch::BestSpeedup() const {
  int best = tree_.best();
  if (best < 0) return std::nullopt;
  return tree_.node(best).outcome.speedup;
}

void TaskSearch::SetOrigin(TaskResult* result) const {
  if (result->best_node < 0) return;
  const Node& best = tree_.node(result->best_node);
  if (best.warm_start) {
    result->best_origin = "builtin";
    return;
  }
  result->best_origin = proposer_->Origin();
  int id = result->best_node;
  while (tree_.node(id).kind == StepKind::kSmall) id = tree_.node(id).parent;
  result->best_refines_warm_start = id != result->best_node && tree_.node(id).warm_start;
}

Status TaskSearch::Run(const std::string& out_dir, TaskResult* result) {
  const double t0 = NowSeconds();
  result->task = task_.name;
  result->status = "none";
  root_ = tree_.AddRoot(task_.source, task_.hash);
  ir_tip_ = root_;
  Status fatal;
  // The warm start: up to warm_budget steps of the warm-start proposer, all
  // large steps from the root, before the main proposer's first step.
  const int warm_budget = warm_ ? std::clamp(cfg_.warm_start_steps, 0, cfg_.steps) : 0;
  bool warming = warm_budget > 0;
  bool main_stepped = false;  // the main proposer has taken a step
  auto end_warm_start = [&] {
    warming = false;
    // Iterative refinement continues from the best warm-start kernel.
    if (cfg_.method == "ir" && tree_.best() >= 0) ir_tip_ = tree_.best();
  };
  int step = 0;
  while (step < cfg_.steps) {
    if (budget_check_) {
      Status b = budget_check_();
      if (!b.ok()) {
        result->status = "stopped: " + b.message();
        result->stop = b;
        break;
      }
    }
    if (cfg_.max_wall_s > 0 && NowSeconds() - t0 > cfg_.max_wall_s) {
      result->status = "stopped: wall-time budget spent";
      result->stop = Status::Error(StatusCode::kCancelled, "wall-time budget spent");
      break;
    }
    bool large = true;
    int node = root_;
    Proposal p;
    const bool warm = warming;
    if (warm) {
      p = warm_->Propose(Context(root_, true));
      if (!p.stop.ok() || p.infra_failure || p.source.empty()) {
        // Declined, or nothing new: no step spent; the main proposer takes over.
        end_warm_start();
        if (progress_) {
          progress_({task_.name, std::string(result->warm_start_steps ? "warm start ended" : "no warm start") + ": " +
                                     FirstLine(p.note, 200),
                     0, cfg_.steps, BestSpeedup()});
        }
        continue;
      }
    } else {
      node = SelectNode(&large);
      p = proposer_->Propose(Context(node, large));
      if (!p.stop.ok()) {
        result->status = "stopped: " + FirstLine(p.note, 300);
        result->stop = Status::Error(p.stop.code(), FirstLine(p.note, 300));
        break;
      }
      if (p.infra_failure) {
        // The LLM failed, not the kernel: no node, no reward; the step is spent.
        result->steps_done = ++step;
        if (progress_) progress_({task_.name, "step " + std::to_string(step) + ": " + FirstLine(p.note, 200), step, cfg_.steps, BestSpeedup()});
        continue;
      }
    }
    Outcome o;
    std::string hash;
    if (p.source.empty()) {
      o.status = "no_candidate";
      o.error = p.note;
    } else {
      hash = Sha256Hex(p.source);
      if (auto dup = tree_.FindByHash(hash)) {
        o.status = "duplicate";
        o.error = "identical to node " + std::to_string(*dup) + " (" + VerdictLine(tree_.node(*dup).outcome) + ")";
      } else {
        Verdict v;
        o = Judge1(p.source, &v, &fatal);
        if (!fatal.ok()) break;
        if (on_judged_ && !warm) on_judged_(p.source, o);
      }
    }
    int child = tree_.AddChild(node, large ? StepKind::kLarge : StepKind::kSmall, p.source, hash, p.note);
    if (!p.plan.is_null()) tree_.SetPlan(child, p.plan);
    if (warm) tree_.SetWarmStart(child);
    tree_.SetOutcome(child, o);
    tree_.Backpropagate(child, Reward(o, cfg_.params.reward));
    if (cfg_.method == "ir" && !warm && !p.source.empty() && o.status != "duplicate") ir_tip_ = child;
    result->steps_done = ++step;
    if (warm) {
      if (++result->warm_start_steps == warm_budget) end_warm_start();
    } else if (!main_stepped) {
      main_stepped = true;
      result->first_correct = o.correct;
    }
    if (store_) {
      Status s = store_->PutTree(task_.name, tree_.ToJson());
      if (!s.ok()) {
        fatal = s;
        break;
      }
    }
    if (progress_) {
      int best = tree_.best();
      char buf[400];
      std::snprintf(buf, sizeof buf, "step %d/%d %s from node %d: %s | best %s", step, cfg_.steps,
                    warm ? "warm-start" : large ? "large" : "small", node, FirstLine(VerdictLine(o), 120).c_str(),
                    best >= 0 ? (std::to_string(tree_.node(best).outcome.speedup).substr(0, 5) + "x").c_str() : "none");
      progress_({task_.name, buf, step, cfg_.steps, BestSpeedup()});
    }
  }
  auto finish = [&]() -> Status {
    result->judged = judged_;
    result->judge_reused = reused_;
    result->wall_s = NowSeconds() - t0;
    std::tie(result->llm_calls, result->llm_replayed) = proposer_->Calls();
    return store_ ? store_->PutTask(task_.name, result->status, result->ToJson()) : Status::Ok();
  };
  if (!fatal.ok()) {
    result->status = "stopped: " + fatal.message();
    result->stop = fatal;
    (void)finish();
    return fatal;
  }
  // The winner: the fastest correct candidates re-timed together, so that a
  // lucky measurement does not win.
  double best_ms = 0;
  for (int id : tree_.BestCorrect(static_cast<size_t>(std::max(1, cfg_.retime_top)))) {
    EvalRequest req;
    req.task = task_;
    req.candidate_path = "node " + std::to_string(id);
    req.candidate_source = tree_.node(id).source;
    req.options = jopts_;
    req.options.use_cache = false;
    EvalResult r = judge_->Evaluate(req);
    // A timeout, a judge error or a failure of the trusted reference can come
    // from load (the re-timing runs while other tasks hold the device and the
    // host's memory): once more before the candidate is dropped.
    auto load_dependent = [](const EvalResult& e) {
      return !e.status.ok() || e.verdict.status == kStatusTimeout || e.verdict.HasFlag("reference_failed");
    };
    if (load_dependent(r)) r = judge_->Evaluate(req);
    if (!r.status.ok() || !r.verdict.correct) {
      std::string why = r.status.ok() ? VerdictLine(OutcomeOf(r.verdict)) : "judge: " + r.status.message();
      result->retime_failures.push_back({{"node", id}, {"reason", FirstLine(why, 300)}});
      if (progress_) {
        progress_({task_.name, "re-timing node " + std::to_string(id) + " failed: " + FirstLine(why, 200), 0, cfg_.steps,
                   BestSpeedup()});
      }
      continue;
    }
    double ms = r.verdict.runtime_ms.value_or(0.0);
    if (result->best_node < 0 || (ms > 0 && ms < best_ms)) {
      result->best_node = id;
      result->best = r.verdict;
      best_ms = ms;
    }
  }
  SetOrigin(result);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  const std::string best_path = out_dir + "/best.py";
  if (result->best_node >= 0) {
    if (result->status == "none") result->status = "found";
    std::string header = "# adaexplore: best kernel for " + task_.name + " (node " + std::to_string(result->best_node);
    for (const auto& [k, sp] : result->best.speedup) {
      char buf[64];
      std::snprintf(buf, sizeof buf, ", %.3fx vs %s", sp, k.c_str());
      header += buf;
    }
    header += " on " + result->best.device + ", tolerance " + jopts_.tolerance + ")\n";
    if (!WriteFile(best_path, header + tree_.node(result->best_node).source)) {
      return Status::Error("cannot write " + best_path);
    }
  } else {
    std::filesystem::remove(best_path, ec);
  }
  return finish();
}

}  // namespace ax::search
