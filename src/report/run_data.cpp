#include "report/run_data.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "common/util.h"

namespace ax::report {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::optional<double> Num(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string Str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object()) return out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

json Parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json() : j;
}

// A speedup worth showing: positive and finite.
std::optional<double> Speedup(const json& speedups, const char* key) {
  auto v = Num(speedups, key);
  if (v && *v > 0) return v;
  return std::nullopt;
}

bool Has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

class Db {
 public:
  ~Db() {
    if (db_) sqlite3_close(db_);
  }
  Status Open(const std::string& path) {
    // Read-only: a report never changes a run, and may read one in progress.
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      std::string e = db_ ? sqlite3_errmsg(db_) : "out of memory";
      return Status::Error("cannot open " + path + ": " + e);
    }
    sqlite3_busy_timeout(db_, 5000);
    path_ = path;
    return Status::Ok();
  }
  // Runs a query; calls row(cols) for each row. Fails with SQLite's reason.
  Status Query(const std::string& sql, int ncols, const std::function<void(const std::vector<std::string>&)>& row) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      return Status::Error(path_ + " is not a readable run store: " + sqlite3_errmsg(db_));
    }
    int rc;
    std::vector<std::string> cols(ncols);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      for (int c = 0; c < ncols; ++c) {
        const unsigned char* v = sqlite3_column_text(st, c);
        int n = sqlite3_column_bytes(st, c);
        cols[c] = v ? std::string(reinterpret_cast<const char*>(v), n) : "";
      }
      row(cols);
    }
    std::string err = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db_);
    sqlite3_finalize(st);
    if (!err.empty()) return Status::Error(path_ + " is not a readable run store: " + err);
    return Status::Ok();
  }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

std::string PromptText(const json& request) {
  std::string out;
  if (!request.is_object() || !request.contains("messages") || !request["messages"].is_array()) return out;
  const auto& msgs = request["messages"];
  for (const auto& m : msgs) {
    if (!m.is_object()) continue;
    if (msgs.size() > 1) out += "[" + Str(m, "role") + "]\n";
    out += Str(m, "content");
    if (msgs.size() > 1) out += "\n\n";
  }
  return out;
}

CallInfo ParseCall(int seq, const std::string& purpose, const std::string& record) {
  CallInfo c;
  c.seq = seq;
  c.purpose = purpose;
  json r = Parse(record);
  if (!r.is_object()) {
    c.ok = false;
    c.error = "unreadable call record";
    return c;
  }
  c.model = Str(r, "model");
  if (r.contains("request")) {
    c.system = Str(r["request"], "system");
    c.prompt = PromptText(r["request"]);
  }
  if (r.contains("reply")) c.reply = Str(r["reply"], "text");
  if (r.contains("ok") && r["ok"].is_boolean()) c.ok = r["ok"].get<bool>();
  c.error = Str(r, "error");
  if (r.contains("usage")) {
    c.input_tokens = static_cast<int64_t>(Num(r["usage"], "input_tokens").value_or(0));
    c.output_tokens = static_cast<int64_t>(Num(r["usage"], "output_tokens").value_or(0));
  }
  c.cost_usd = Num(r, "cost_usd").value_or(0);
  c.latency_s = Num(r, "latency_s").value_or(0);
  return c;
}

NodeInfo ParseNode(const json& n, const std::map<std::string, json>& verdicts) {
  NodeInfo x;
  x.id = static_cast<int>(Num(n, "id").value_or(0));
  x.parent = static_cast<int>(Num(n, "parent").value_or(-1));
  x.kind = Str(n, "kind");
  x.warm_start = n.is_object() && n.value("warm_start", json(false)).is_boolean() && n.value("warm_start", false);
  x.source = Str(n, "source");
  x.hash = Str(n, "hash");
  x.note = Str(n, "note");
  x.visits = static_cast<int>(Num(n, "visits").value_or(0));
  x.reward = Num(n, "reward").value_or(0);
  const json o = n.contains("outcome") ? n["outcome"] : json();
  x.status = Str(o, "status");
  x.correct = o.is_object() && o.value("correct", false);
  x.error = Str(o, "error");
  x.flags = Strings(o, "flags");
  if (auto rt = Num(o, "runtime_ms"); rt && *rt > 0) x.runtime_ms = rt;
  if (x.kind != "root" && !x.hash.empty()) {
    if (auto it = verdicts.find(x.hash); it != verdicts.end() && x.status != "duplicate") x.verdict = it->second;
  }
  if (x.correct) {
    const json sp = x.verdict.is_object() && x.verdict.contains("speedup") ? x.verdict["speedup"] : json();
    x.speedup_eager = Speedup(sp, "eager");
    if (!x.speedup_eager) x.speedup_eager = Speedup(o, "speedup");
    x.speedup_compile = Speedup(sp, "compile");
  }
  return x;
}

// Assigns each node (1..) the calls of its step: calls in store order, a new
// step at each "propose" or "revise" call.
void MapCalls(TaskData* t) {
  std::vector<std::vector<int>> steps;
  for (size_t i = 0; i < t->calls.size(); ++i) {
    const std::string& p = t->calls[i].purpose;
    if (steps.empty() || p == "propose" || p == "revise") steps.emplace_back();
    steps.back().push_back(static_cast<int>(i));
  }
  for (size_t k = 0; k < steps.size() && k + 1 < t->nodes.size(); ++k) t->nodes[k + 1].calls = steps[k];
}

}  // namespace

Status LoadRun(const std::string& dir, RunData* out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error("not a run folder: " + dir + " (no such directory)");
  const std::string db_path = (fs::path(dir) / "run.sqlite").string();
  if (!fs::is_regular_file(db_path, ec)) return Status::Error("not a run folder: " + dir + " (no run.sqlite)");
  Db db;
  if (Status s = db.Open(db_path); !s.ok()) return s;

  RunData run;
  run.dir = dir;
  std::string config_text;
  if (Status s = db.Query("SELECT value FROM meta WHERE key = 'config'", 1,
                          [&](const std::vector<std::string>& r) { config_text = r[0]; });
      !s.ok())
    return s;
  run.config = Parse(config_text);
  if (!run.config.is_object()) run.config = json::object();

  std::map<std::string, std::map<std::string, json>> verdicts;  // task -> hash -> verdict
  if (Status s = db.Query("SELECT task, cand_hash, verdict FROM verdicts", 3,
                          [&](const std::vector<std::string>& r) { verdicts[r[0]][r[1]] = Parse(r[2]); });
      !s.ok())
    return s;
  std::map<std::string, json> trees;
  if (Status s = db.Query("SELECT task, tree FROM trees", 2,
                          [&](const std::vector<std::string>& r) { trees[r[0]] = Parse(r[1]); });
      !s.ok())
    return s;
  std::map<std::string, std::pair<std::string, json>> summaries;
  if (Status s = db.Query("SELECT task, status, summary FROM tasks", 3,
                          [&](const std::vector<std::string>& r) { summaries[r[0]] = {r[1], Parse(r[2])}; });
      !s.ok())
    return s;
  std::map<std::string, std::vector<CallInfo>> calls;
  if (Status s = db.Query("SELECT task, seq, purpose, record FROM llm_calls ORDER BY task, seq", 4,
                          [&](const std::vector<std::string>& r) {
                            calls[r[0]].push_back(ParseCall(std::atoi(r[1].c_str()), r[2], r[3]));
                          });
      !s.ok())
    return s;

  // Tasks: the configuration's order, then any other task the store knows.
  std::vector<std::string> names;
  std::map<std::string, std::string> paths;
  std::set<std::string> seen;
  if (run.config.contains("tasks") && run.config["tasks"].is_array()) {
    for (const auto& t : run.config["tasks"]) {
      std::string name = Str(t, "name");
      if (name.empty() || !seen.insert(name).second) continue;
      names.push_back(name);
      paths[name] = Str(t, "path");
    }
  }
  std::set<std::string> others;
  for (const auto& [k, v] : trees) others.insert(k);
  for (const auto& [k, v] : summaries) others.insert(k);
  for (const auto& [k, v] : calls) others.insert(k);
  for (const auto& [k, v] : verdicts) others.insert(k);
  for (const auto& k : others)
    if (seen.insert(k).second) names.push_back(k);

  const bool single = names.size() == 1;
  for (const std::string& name : names) {
    TaskData t;
    t.name = name;
    t.path = paths[name];
    const auto& tv = verdicts[name];
    // The tree.
    if (auto it = trees.find(name); it != trees.end() && it->second.is_object() && it->second.contains("nodes") &&
                                    it->second["nodes"].is_array()) {
      for (const auto& n : it->second["nodes"])
        if (n.is_object()) t.nodes.push_back(ParseNode(n, tv));
      std::sort(t.nodes.begin(), t.nodes.end(), [](const NodeInfo& a, const NodeInfo& b) { return a.id < b.id; });
    }
    t.calls = calls[name];
    MapCalls(&t);
    // Cost.
    for (const auto& c : t.calls) {
      Cost one;
      one.llm_calls = 1;
      one.input_tokens = c.input_tokens;
      one.output_tokens = c.output_tokens;
      one.usd = c.cost_usd;
      one.llm_latency_s = c.latency_s;
      t.cost += one;
      t.cost_by_purpose[c.purpose] += one;
    }
    for (const auto& [hash, v] : tv) {
      t.cost.judge_s += Num(v, "judge_seconds").value_or(0);
      t.cost.judged += 1;
      if (Has(Strings(v, "flags"), "degenerate_task")) t.degenerate = true;
      if (v.is_object() && v.contains("task") && v["task"].is_object()) {
        const json& d = v["task"].value("degenerate", json());
        if ((d.is_array() && !d.empty()) || (d.is_boolean() && d.get<bool>())) t.degenerate = true;
      }
    }
    t.llm_calls = static_cast<int>(t.calls.size());
    t.judged = static_cast<int>(tv.size());
    t.steps = t.nodes.empty() ? 0 : static_cast<int>(t.nodes.size()) - 1;
    // The summary, when the task finished.
    auto sit = summaries.find(name);
    if (sit != summaries.end() && sit->second.second.is_object()) {
      const json& s = sit->second.second;
      t.has_summary = true;
      t.status = sit->second.first;
      t.steps = static_cast<int>(Num(s, "steps").value_or(t.steps));
      t.best_node = static_cast<int>(Num(s, "best_node").value_or(-1));
      t.cost.wall_s = Num(s, "wall_s").value_or(0);
      t.flags = Strings(s, "flags");
      t.device = Str(s, "device");
      t.warm_start_steps = static_cast<int>(Num(s, "warm_start_steps").value_or(0));
      t.best_origin = Str(s, "best_origin");
      t.best_refines_warm_start = s.value("best_refines_warm_start", json(false)).is_boolean() &&
                                  s.value("best_refines_warm_start", false);
      if (t.best_node >= 0) {
        json sp = s.value("speedup", json::object());
        t.speedup_eager = Speedup(sp, "eager");
        t.speedup_compile = Speedup(sp, "compile");
        t.runtime_ms = Num(s, "runtime_ms");
        json b = s.value("baseline_ms", json::object());
        t.baseline_eager_ms = Num(b, "eager");
        t.baseline_compile_ms = Num(b, "compile");
      }
    } else {
      // Killed or still running: the fastest correct node judged so far.
      t.status = t.nodes.empty() ? "not started" : "incomplete";
      double best = -1;
      for (const auto& n : t.nodes) {
        if (!n.correct) continue;
        double sp = n.speedup_eager.value_or(0);
        if (sp > best) {
          best = sp;
          t.best_node = n.id;
        }
      }
      if (t.best_node >= 0) {
        const NodeInfo& n = *FindNode(t, t.best_node);
        t.speedup_eager = n.speedup_eager;
        t.speedup_compile = n.speedup_compile;
        t.runtime_ms = n.runtime_ms;
        t.flags = n.flags;
      }
    }
    if (Has(t.flags, "degenerate_task")) t.degenerate = true;
    // Baselines, when the summary lacks them: from any timed verdict.
    for (const auto& [hash, v] : tv) {
      json b = v.is_object() ? v.value("baseline_ms", json::object()) : json::object();
      if (!t.baseline_eager_ms) t.baseline_eager_ms = Num(b, "eager");
      if (!t.baseline_compile_ms) t.baseline_compile_ms = Num(b, "compile");
      if (t.device.empty()) t.device = Str(v, "device");
    }
    // The best kernel: best.py as written (bench: DIR/TASK/best.py;
    // optimize: DIR/best.py), else the best node's source.
    for (const fs::path& p : {fs::path(dir) / name / "best.py", fs::path(dir) / "best.py"}) {
      if (p == fs::path(dir) / "best.py" && !single) continue;
      if (t.best_node >= 0 && fs::is_regular_file(p, ec)) {
        if (auto text = ReadFile(p.string())) {
          t.best_file = p.string();
          t.best_source = *text;
          break;
        }
      }
    }
    if (t.best_source.empty())
      if (const NodeInfo* n = FindNode(t, t.best_node)) t.best_source = n->source;
    run.tasks.push_back(std::move(t));
  }
  *out = std::move(run);
  return Status::Ok();
}

const NodeInfo* FindNode(const TaskData& t, int id) {
  for (const auto& n : t.nodes)
    if (n.id == id) return &n;
  return nullptr;
}

TaskOutcome ToOutcome(const TaskData& t) {
  TaskOutcome o;
  o.name = t.name;
  o.correct = t.best_node >= 0;
  if (o.correct) {
    o.speedup_eager = t.speedup_eager;
    o.speedup_compile = t.speedup_compile;
  }
  o.degenerate = t.degenerate;
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    const NodeInfo& n = t.nodes[i];
    o.step_speedups.push_back(n.correct ? n.speedup_eager.value_or(0) : 0);
  }
  o.cost = t.cost;
  return o;
}

std::vector<TaskOutcome> ToOutcomes(const RunData& run) {
  std::vector<TaskOutcome> out;
  for (const auto& t : run.tasks) out.push_back(ToOutcome(t));
  return out;
}

}  // namespace ax::report
