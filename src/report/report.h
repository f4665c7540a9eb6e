// Report renderers over a loaded run and its metrics: the terminal summary,
// the JSON and CSV exports, the A/B comparison of two runs, and the
// self-contained HTML page (html_report.cpp). Each returns text; the caller
// writes it where the user asked.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "report/metrics.h"
#include "report/run_data.h"

namespace ax::report {

struct Report {
  RunData run;
  RunMetrics metrics;
};
Report MakeReport(RunData run);

// "1.234x", or "-" when absent.
std::string FormatSpeedup(const std::optional<double>& s);

// A compact per-task table and the headline figures, for a terminal.
std::string TextSummary(const Report& r);

// Per task and aggregate, as one JSON object (docs/report.md lists the keys).
nlohmann::json ReportJson(const Report& r);
nlohmann::json MetricsJson(const RunMetrics& m);

// Tidy CSV, one figure per row: run,scope,name,baseline,metric,value.
// scope: task (name = the task), all / non_degenerate (aggregates), cost,
// scaling (name = the step). `label` fills the run column.
std::string ReportCsv(const Report& r, const std::string& label, bool header = true);

// A/B: tasks matched by name. Aggregates are over the tasks both runs have.
struct TaskDelta {
  std::string name;
  bool in_a = false, in_b = false;
  std::string status_a, status_b;
  std::optional<double> eager_a, eager_b, compile_a, compile_b;
  // b / a of the best speedups, when both are present.
  std::optional<double> eager_ratio, compile_ratio;
};
struct Comparison {
  std::string dir_a, dir_b;
  std::vector<TaskDelta> tasks;  // A's order, then tasks only in B
  int common = 0, only_a = 0, only_b = 0;
  RunMetrics a, b;               // over the common tasks
};
Comparison Compare(const Report& a, const Report& b);
std::string TextComparison(const Comparison& c);
nlohmann::json ComparisonJson(const Comparison& c);

// The HTML page. `html_path` is where it will be written: links to best.py
// files are made relative to its folder. `cmp` adds an A/B section.
std::string HtmlReport(const Report& r, const std::string& html_path, const Comparison* cmp = nullptr);

// Escapes text for HTML element content and attribute values.
std::string HtmlEscape(const std::string& s);
// JSON for a <script type="application/json"> block: <, >, & and the line
// separators written as \u escapes, so no text inside can close the script.
std::string ScriptSafeJson(const nlohmann::json& j);

}  // namespace ax::report
