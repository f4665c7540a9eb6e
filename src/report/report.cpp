#include "report/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ax::report {

using nlohmann::json;

namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Pct(double f) { return Fmt("%.1f%%", 100.0 * f); }

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::string Pad(const std::string& s, size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

std::string Cut(const std::string& s, size_t w) { return s.size() <= w ? s : s.substr(0, w - 3) + "..."; }

std::string ConfigLine(const RunData& run) {
  const json& c = run.config;
  auto get = [&](const char* k) -> std::string {
    if (!c.contains(k)) return "?";
    return c[k].is_string() ? c[k].get<std::string>() : c[k].dump();
  };
  std::string line = "run " + run.dir + ": " + std::to_string(run.tasks.size()) + " task" +
                     (run.tasks.size() == 1 ? "" : "s");
  if (!c.empty()) {
    line += ", search " + get("search") + ", " + get("steps") + " steps, proposer " + get("proposer") +
            ", device " + get("device") + ", tolerance " + get("tolerance");
    if (c.contains("precision") && c["precision"] != "fp32") line += ", precision " + get("precision");
    if (c.contains("timing") && c["timing"] != "host") line += ", timing " + get("timing");
  }
  return line;
}

std::string SpeedupLine(const SpeedupStats& s) {
  std::string name = s.baseline == "eager" ? "vs eager  " : "vs compile";
  if (s.timed == 0)
    return "  " + name + ": no correct kernel timed against this baseline" +
           (s.baseline == "compile" ? " (torch.compile is not timed on the CPU)" : "");
  std::string line = "  " + name + ": user score " + Fmt("%.3f", s.user_score) + " | over " + std::to_string(s.timed) +
                     " timed: geomean " + Fmt("%.3fx", s.geomean) + ", median " + Fmt("%.3fx", s.median) + ", mean " +
                     Fmt("%.3fx", s.mean);
  if (s.clamped)
    line += " (clamped at 10x; unclamped " + Fmt("%.3fx", s.geomean_unclamped) + ", " + Fmt("%.3fx", s.median_unclamped) +
            ", " + Fmt("%.3fx", s.mean_unclamped) + ")";
  line += " | fast_p";
  for (const auto& [p, f] : s.fast_p) line += " " + Fmt("%g", p) + ":" + Fmt("%.2f", f);
  return line;
}

json StatsJson(const SpeedupStats& s) {
  json fp = json::object();
  for (const auto& [p, f] : s.fast_p) fp[Fmt("%g", p)] = f;
  return {{"baseline", s.baseline},
          {"tasks", s.tasks},
          {"timed", s.timed},
          {"geomean", s.geomean},
          {"median", s.median},
          {"mean", s.mean},
          {"geomean_unclamped", s.geomean_unclamped},
          {"median_unclamped", s.median_unclamped},
          {"mean_unclamped", s.mean_unclamped},
          {"clamped", s.clamped},
          {"clamp", kSpeedupClamp},
          {"user_score", s.user_score},
          {"fast_p", fp}};
}

json SetJson(const SetMetrics& m) {
  return {{"tasks", m.tasks}, {"correct", m.correct}, {"correctness", m.correctness},
          {"eager", StatsJson(m.eager)}, {"compile", StatsJson(m.compile)}};
}

json CostJson(const Cost& c) {
  return {{"llm_calls", c.llm_calls}, {"input_tokens", c.input_tokens}, {"output_tokens", c.output_tokens},
          {"cost_usd", c.usd},        {"llm_latency_s", c.llm_latency_s}, {"wall_s", c.wall_s},
          {"judge_s", c.judge_s},     {"judged", c.judged}};
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Num(double v) { return Fmt("%.6g", v); }

}  // namespace

Report MakeReport(RunData run) {
  Report r;
  r.metrics = ComputeMetrics(ToOutcomes(run));
  r.run = std::move(run);
  return r;
}

std::string FormatSpeedup(const std::optional<double>& s) { return s ? Fmt("%.3fx", *s) : "-"; }

std::string TextSummary(const Report& r) {
  std::ostringstream o;
  o << ConfigLine(r.run) << "\n";
  size_t w = 4;
  for (const auto& t : r.run.tasks) w = std::max(w, std::min<size_t>(t.name.size(), 40));
  o << Pad("task", w) << "  " << Pad("status", 10) << "  " << Pad("eager", 9, true) << "  " << Pad("compile", 9, true)
    << "  " << Pad("steps", 5, true) << "  " << Pad("judged", 6, true) << "  " << Pad("calls", 5, true) << "\n";
  for (const auto& t : r.run.tasks) {
    std::string status = Cut(t.status, 10);
    o << Pad(Cut(t.name, 40), w) << "  " << Pad(status, 10) << "  " << Pad(FormatSpeedup(t.speedup_eager), 9, true)
      << "  " << Pad(FormatSpeedup(t.speedup_compile), 9, true) << "  " << Pad(std::to_string(t.steps), 5, true) << "  "
      << Pad(std::to_string(t.judged), 6, true) << "  " << Pad(std::to_string(t.llm_calls), 5, true)
      << (t.degenerate ? "  (degenerate)" : "") << "\n";
  }
  for (const auto& t : r.run.tasks)
    if (t.status.rfind("stopped", 0) == 0) o << "  " << t.name << ": " << t.status << "\n";
  for (const auto& t : r.run.tasks) {
    if (t.warm_start_steps <= 0) continue;
    o << "  " << t.name << ": " << t.warm_start_steps << " warm-start step" << (t.warm_start_steps == 1 ? "" : "s");
    if (!t.best_origin.empty()) {
      o << "; best kernel from " << t.best_origin << (t.best_refines_warm_start ? " (refining a warm-start kernel)" : "");
    }
    o << "\n";
  }
  const RunMetrics& m = r.metrics;
  auto block = [&](const char* title, const SetMetrics& s) {
    o << title << ": correct " << s.correct << "/" << s.tasks << " (" << Pct(s.correctness) << ")\n";
    o << SpeedupLine(s.eager) << "\n" << SpeedupLine(s.compile) << "\n";
  };
  block("all tasks", m.all);
  if (m.degenerate > 0) {
    std::string names;
    for (const auto& n : m.degenerate_tasks) names += (names.empty() ? "" : ", ") + n;
    o << "excluding " << m.degenerate << " degenerate task" << (m.degenerate == 1 ? "" : "s") << " (" << Cut(names, 200)
      << ")\n";
    block("non-degenerate", m.non_degenerate);
  } else {
    o << "no degenerate tasks\n";
  }
  const Cost& c = m.cost;
  o << "cost: " << c.llm_calls << " LLM calls, " << c.input_tokens << " input + " << c.output_tokens << " output tokens, $"
    << Fmt("%.4f", c.usd) << "; search wall " << Fmt("%.1f", c.wall_s) << " s (summed over tasks), judge "
    << Fmt("%.1f", c.judge_s) << " s over " << c.judged << " verdicts\n";
  if (!m.scaling.empty()) {
    o << "scaling (user score vs eager by step):";
    size_t n = m.scaling.size();
    std::set<size_t> pick = {0, n - 1};
    for (size_t k = 1; k < 5; ++k) pick.insert(k * (n - 1) / 5);
    for (size_t k : pick) o << " " << m.scaling[k].step << ":" << Fmt("%.3f", m.scaling[k].user_score);
    o << "\n";
  }
  o << "speedups of a task's best kernel (re-timed at the end); statistics over correct, timed kernels, clamped at 10x;\n"
       "user score = geomean of min(max(s,1),10) over all tasks (no kernel = 1); fast_p over all tasks\n";
  return o.str();
}

json MetricsJson(const RunMetrics& m) {
  json sc = json::array();
  for (const auto& p : m.scaling)
    sc.push_back({{"step", p.step}, {"user_score", p.user_score}, {"correct_fraction", p.correct_fraction}});
  return {{"all", SetJson(m.all)},
          {"non_degenerate", SetJson(m.non_degenerate)},
          {"degenerate", m.degenerate},
          {"degenerate_tasks", m.degenerate_tasks},
          {"cost", CostJson(m.cost)},
          {"scaling", sc}};
}

json ReportJson(const Report& r) {
  json tasks = json::array();
  for (const auto& t : r.run.tasks) {
    json by = json::object();
    for (const auto& [k, c] : t.cost_by_purpose) by[k] = CostJson(c);
    tasks.push_back({{"task", t.name},
                     {"path", t.path},
                     {"status", t.status},
                     {"complete", t.has_summary},
                     {"correct", t.best_node >= 0},
                     {"best_node", t.best_node},
                     {"speedup", {{"eager", Opt(t.speedup_eager)}, {"compile", Opt(t.speedup_compile)}}},
                     {"runtime_ms", Opt(t.runtime_ms)},
                     {"baseline_ms", {{"eager", Opt(t.baseline_eager_ms)}, {"compile", Opt(t.baseline_compile_ms)}}},
                     {"degenerate", t.degenerate},
                     {"flags", t.flags},
                     {"device", t.device},
                     {"steps", t.steps},
                     {"judged", t.judged},
                     {"llm_calls", t.llm_calls},
                     {"warm_start_steps", t.warm_start_steps},
                     {"best_origin", t.best_origin.empty() ? json(nullptr) : json(t.best_origin)},
                     {"best_refines_warm_start", t.best_refines_warm_start},
                     {"best_file", t.best_file},
                     {"cost", CostJson(t.cost)},
                     {"cost_by_purpose", by}});
  }
  return {{"run", r.run.dir}, {"config", r.run.config}, {"tasks", tasks}, {"metrics", MetricsJson(r.metrics)}};
}

std::string ReportCsv(const Report& r, const std::string& label, bool header) {
  std::ostringstream o;
  if (header) o << "run,scope,name,baseline,metric,value\n";
  auto row = [&](const std::string& scope, const std::string& name, const std::string& base, const std::string& metric,
                 const std::string& value) {
    o << CsvField(label) << "," << scope << "," << CsvField(name) << "," << base << "," << metric << ","
      << CsvField(value) << "\n";
  };
  for (const auto& t : r.run.tasks) {
    row("task", t.name, "", "status", t.status);
    row("task", t.name, "", "correct", t.best_node >= 0 ? "1" : "0");
    row("task", t.name, "", "degenerate", t.degenerate ? "1" : "0");
    if (t.speedup_eager) row("task", t.name, "eager", "speedup", Num(*t.speedup_eager));
    if (t.speedup_compile) row("task", t.name, "compile", "speedup", Num(*t.speedup_compile));
    if (t.runtime_ms) row("task", t.name, "", "runtime_ms", Num(*t.runtime_ms));
    if (t.baseline_eager_ms) row("task", t.name, "eager", "baseline_ms", Num(*t.baseline_eager_ms));
    if (t.baseline_compile_ms) row("task", t.name, "compile", "baseline_ms", Num(*t.baseline_compile_ms));
    row("task", t.name, "", "steps", std::to_string(t.steps));
    row("task", t.name, "", "judged", std::to_string(t.judged));
    row("task", t.name, "", "llm_calls", std::to_string(t.llm_calls));
    row("task", t.name, "", "input_tokens", std::to_string(t.cost.input_tokens));
    row("task", t.name, "", "output_tokens", std::to_string(t.cost.output_tokens));
    row("task", t.name, "", "cost_usd", Num(t.cost.usd));
    row("task", t.name, "", "wall_s", Num(t.cost.wall_s));
    row("task", t.name, "", "judge_s", Num(t.cost.judge_s));
  }
  auto set = [&](const char* scope, const SetMetrics& s) {
    row(scope, "", "", "tasks", std::to_string(s.tasks));
    row(scope, "", "", "correct", std::to_string(s.correct));
    row(scope, "", "", "correctness", Num(s.correctness));
    for (const SpeedupStats* st : {&s.eager, &s.compile}) {
      const std::string& b = st->baseline;
      row(scope, "", b, "timed", std::to_string(st->timed));
      row(scope, "", b, "geomean", Num(st->geomean));
      row(scope, "", b, "median", Num(st->median));
      row(scope, "", b, "mean", Num(st->mean));
      row(scope, "", b, "geomean_unclamped", Num(st->geomean_unclamped));
      row(scope, "", b, "median_unclamped", Num(st->median_unclamped));
      row(scope, "", b, "mean_unclamped", Num(st->mean_unclamped));
      row(scope, "", b, "user_score", Num(st->user_score));
      for (const auto& [p, f] : st->fast_p) row(scope, "", b, "fast_" + Fmt("%g", p), Num(f));
    }
  };
  set("all", r.metrics.all);
  set("non_degenerate", r.metrics.non_degenerate);
  row("all", "", "", "degenerate", std::to_string(r.metrics.degenerate));
  const Cost& c = r.metrics.cost;
  row("cost", "", "", "llm_calls", std::to_string(c.llm_calls));
  row("cost", "", "", "input_tokens", std::to_string(c.input_tokens));
  row("cost", "", "", "output_tokens", std::to_string(c.output_tokens));
  row("cost", "", "", "cost_usd", Num(c.usd));
  row("cost", "", "", "wall_s", Num(c.wall_s));
  row("cost", "", "", "judge_s", Num(c.judge_s));
  row("cost", "", "", "judged", std::to_string(c.judged));
  for (const auto& p : r.metrics.scaling) {
    row("scaling", std::to_string(p.step), "eager", "user_score", Num(p.user_score));
    row("scaling", std::to_string(p.step), "", "correct_fraction", Num(p.correct_fraction));
  }
  return o.str();
}

// ---------------------------------------------------------------- A/B

Comparison Compare(const Report& a, const Report& b) {
  Comparison c;
  c.dir_a = a.run.dir;
  c.dir_b = b.run.dir;
  std::map<std::string, const TaskData*> in_b;
  for (const auto& t : b.run.tasks) in_b[t.name] = &t;
  std::set<std::string> in_a;
  std::vector<TaskOutcome> oa, ob;
  for (const auto& t : a.run.tasks) {
    in_a.insert(t.name);
    TaskDelta d;
    d.name = t.name;
    d.in_a = true;
    d.status_a = t.status;
    d.eager_a = t.speedup_eager;
    d.compile_a = t.speedup_compile;
    if (auto it = in_b.find(t.name); it != in_b.end()) {
      const TaskData& u = *it->second;
      d.in_b = true;
      d.status_b = u.status;
      d.eager_b = u.speedup_eager;
      d.compile_b = u.speedup_compile;
      if (d.eager_a && d.eager_b) d.eager_ratio = *d.eager_b / *d.eager_a;
      if (d.compile_a && d.compile_b) d.compile_ratio = *d.compile_b / *d.compile_a;
      oa.push_back(ToOutcome(t));
      ob.push_back(ToOutcome(u));
      ++c.common;
    } else {
      ++c.only_a;
    }
    c.tasks.push_back(d);
  }
  for (const auto& u : b.run.tasks) {
    if (in_a.count(u.name)) continue;
    TaskDelta d;
    d.name = u.name;
    d.in_b = true;
    d.status_b = u.status;
    d.eager_b = u.speedup_eager;
    d.compile_b = u.speedup_compile;
    c.tasks.push_back(d);
    ++c.only_b;
  }
  c.a = ComputeMetrics(oa);
  c.b = ComputeMetrics(ob);
  return c;
}

std::string TextComparison(const Comparison& c) {
  std::ostringstream o;
  o << "A: " << c.dir_a << "\nB: " << c.dir_b << "\n";
  o << c.common << " tasks in both";
  if (c.only_a) o << ", " << c.only_a << " only in A";
  if (c.only_b) o << ", " << c.only_b << " only in B";
  o << " (aggregates over the tasks in both)\n";
  size_t w = 4;
  for (const auto& t : c.tasks) w = std::max(w, std::min<size_t>(t.name.size(), 40));
  o << Pad("task", w) << "  " << Pad("A eager", 9, true) << "  " << Pad("B eager", 9, true) << "  " << Pad("B/A", 7, true)
    << "  " << Pad("A compile", 9, true) << "  " << Pad("B compile", 9, true) << "  " << Pad("B/A", 7, true) << "\n";
  for (const auto& t : c.tasks) {
    auto ratio = [](const std::optional<double>& r) { return r ? Fmt("%.3f", *r) : std::string("-"); };
    o << Pad(Cut(t.name, 40), w) << "  " << Pad(t.in_a ? FormatSpeedup(t.eager_a) : "absent", 9, true) << "  "
      << Pad(t.in_b ? FormatSpeedup(t.eager_b) : "absent", 9, true) << "  " << Pad(ratio(t.eager_ratio), 7, true) << "  "
      << Pad(t.in_a ? FormatSpeedup(t.compile_a) : "absent", 9, true) << "  "
      << Pad(t.in_b ? FormatSpeedup(t.compile_b) : "absent", 9, true) << "  " << Pad(ratio(t.compile_ratio), 7, true)
      << "\n";
  }
  auto line = [&](const std::string& name, double a, double b, const char* fmt) {
    o << "  " << Pad(name, 28) << Pad(Fmt(fmt, a), 10, true) << "  " << Pad(Fmt(fmt, b), 10, true) << "  "
      << Pad((b - a >= 0 ? "+" : "") + Fmt(fmt, b - a), 10, true) << "\n";
  };
  o << "  " << Pad("figure", 28) << Pad("A", 10, true) << "  " << Pad("B", 10, true) << "  " << Pad("B - A", 10, true)
    << "\n";
  line("correctness", c.a.all.correctness, c.b.all.correctness, "%.3f");
  for (const char* base : {"eager", "compile"}) {
    const SpeedupStats& sa = std::string(base) == "eager" ? c.a.all.eager : c.a.all.compile;
    const SpeedupStats& sb = std::string(base) == "eager" ? c.b.all.eager : c.b.all.compile;
    if (sa.timed == 0 && sb.timed == 0) {
      o << "  vs " << base << ": no timed correct kernel in either run\n";
      continue;
    }
    std::string b = base;
    line("user score vs " + b, sa.user_score, sb.user_score, "%.3f");
    line("geomean vs " + b + " (<=10x)", sa.geomean, sb.geomean, "%.3f");
    line("median vs " + b + " (<=10x)", sa.median, sb.median, "%.3f");
    for (size_t i = 0; i < sa.fast_p.size(); ++i)
      line("fast_" + Fmt("%g", sa.fast_p[i].first) + " vs " + b, sa.fast_p[i].second, sb.fast_p[i].second, "%.3f");
  }
  line("non-degenerate user score", c.a.non_degenerate.eager.user_score, c.b.non_degenerate.eager.user_score, "%.3f");
  line("LLM calls", static_cast<double>(c.a.cost.llm_calls), static_cast<double>(c.b.cost.llm_calls), "%.0f");
  line("tokens (in + out)", static_cast<double>(c.a.cost.input_tokens + c.a.cost.output_tokens),
       static_cast<double>(c.b.cost.input_tokens + c.b.cost.output_tokens), "%.0f");
  line("dollars", c.a.cost.usd, c.b.cost.usd, "%.4f");
  line("search wall s (summed)", c.a.cost.wall_s, c.b.cost.wall_s, "%.1f");
  line("judge s", c.a.cost.judge_s, c.b.cost.judge_s, "%.1f");
  return o.str();
}

json ComparisonJson(const Comparison& c) {
  json tasks = json::array();
  for (const auto& t : c.tasks) {
    tasks.push_back({{"task", t.name},
                     {"in_a", t.in_a},
                     {"in_b", t.in_b},
                     {"status_a", t.status_a},
                     {"status_b", t.status_b},
                     {"speedup_a", {{"eager", Opt(t.eager_a)}, {"compile", Opt(t.compile_a)}}},
                     {"speedup_b", {{"eager", Opt(t.eager_b)}, {"compile", Opt(t.compile_b)}}},
                     {"ratio_b_over_a", {{"eager", Opt(t.eager_ratio)}, {"compile", Opt(t.compile_ratio)}}}});
  }
  return {{"a", c.dir_a},
          {"b", c.dir_b},
          {"common", c.common},
          {"only_a", c.only_a},
          {"only_b", c.only_b},
          {"tasks", tasks},
          {"metrics_a", MetricsJson(c.a)},
          {"metrics_b", MetricsJson(c.b)}};
}

}  // namespace ax::report
