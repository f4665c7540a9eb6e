#include "cli/eval_cmd.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "cli/cli_support.h"
#include "common/util.h"

namespace ax::cli {

int EvaluateOne(const std::string& task_spec, const std::string& candidate_path, CommonFlags& c, const JudgeFlags& f,
                Verdict* verdict) {
  EvalRequest req;
  if (!CheckOptions(&c, f, &req.options)) return kExitBadInput;
  if (!OneTask(task_spec, &req.task)) return kExitBadInput;
  auto source = ReadFile(candidate_path);
  if (!source) {
    Fail("cannot read candidate file: " + candidate_path);
    return kExitBadInput;
  }
  req.candidate_path = std::filesystem::absolute(candidate_path).string();
  req.candidate_source = *source;
  auto pool = MakeJudgeOrFail(c, 1, 1);
  if (!pool) return kExitEnvironment;
  EvalResult r = pool->Evaluate(req);
  if (!r.status.ok()) {
    Fail(r.status.message());
    return r.bad_input ? kExitBadInput : kExitEnvironment;
  }
  *verdict = r.verdict;
  return kExitOk;
}

int RunEval(const std::string& task_spec, const std::string& candidate_path, CommonFlags& c, const JudgeFlags& f,
            bool as_json) {
  Verdict v;
  int code = EvaluateOne(task_spec, candidate_path, c, f, &v);
  if (code != kExitOk) return code;
  if (as_json) {
    std::cout << v.ToJson().dump() << std::endl;
  } else {
    std::cout << v.ToText();
  }
  return kExitOk;
}

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


int RunTasks(const std::string& spec, CommonFlags& c, const std::string& tolerance, bool as_json) {
  ax::JudgeOptions o;
  JudgeFlags tj;
  tj.tolerance = tolerance;
  if (!CheckOptions(&c, tj, &o)) return kExitBadInput;
  std::vector<ax::TaskRef> found;
  if (ax::Status s = ax::ResolveTasks(spec, &found); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  auto pool = MakeJudgeOrFail(c, 1, 0);
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
    if (as_json) {
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

}  // namespace ax::cli
