#include "cli/report_cmd.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "report/report.h"

namespace ax::cli {

namespace {

constexpr int kExitBadInput = 2;

void Fail(const std::string& msg) { std::fprintf(stderr, "adaexplore: %s\n", msg.c_str()); }

// Writes text to path ("-" = stdout). False (after saying why) on failure.
bool Emit(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out) {
    Fail("cannot write " + path);
    return false;
  }
  return true;
}

}  // namespace

void RegisterReportCommand(CLI::App& app, ReportFlags* f, CLI::App** sub) {
  CLI::App* cmd = app.add_subcommand("report", "summarise a run folder: metrics, per-task table, HTML, JSON/CSV, A/B");
  cmd->add_option("RUN", f->run, "run folder (the --out of optimize or bench)")->required();
  cmd->add_option("--vs", f->vs, "a second run folder (B) to compare RUN (A) with, task by task");
  cmd->add_option("--html", f->html, "write a self-contained HTML report to FILE");
  cmd->add_option("--json", f->json, "write per-task and aggregate figures as JSON to FILE (- for stdout)");
  cmd->add_option("--csv", f->csv, "write the figures as tidy CSV (run,scope,name,baseline,metric,value) to FILE (- for stdout)");
  cmd->add_flag("--quiet", f->quiet, "do not print the terminal summary");
  *sub = cmd;
}

int RunReportCommand(const ReportFlags& f) {
  if (f.json == "-" && f.csv == "-") {
    Fail("--json - and --csv - cannot both go to stdout");
    return kExitBadInput;
  }
  report::RunData a;
  if (Status s = report::LoadRun(f.run, &a); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  report::Report ra = report::MakeReport(std::move(a));
  std::optional<report::Report> rb;
  std::optional<report::Comparison> cmp;
  if (!f.vs.empty()) {
    report::RunData b;
    if (Status s = report::LoadRun(f.vs, &b); !s.ok()) {
      Fail(s.message());
      return kExitBadInput;
    }
    rb = report::MakeReport(std::move(b));
    cmp = report::Compare(ra, *rb);
  }
  const bool stdout_taken = f.json == "-" || f.csv == "-";
  if (!f.quiet && !stdout_taken) {
    std::cout << report::TextSummary(ra);
    if (cmp) std::cout << "\n" << report::TextComparison(*cmp);
    std::cout.flush();
  }
  if (!f.json.empty()) {
    nlohmann::json j = report::ReportJson(ra);
    if (cmp) j = {{"a", j}, {"b", report::ReportJson(*rb)}, {"comparison", report::ComparisonJson(*cmp)}};
    if (!Emit(f.json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")) return kExitBadInput;
  }
  if (!f.csv.empty()) {
    std::string text = report::ReportCsv(ra, cmp ? "A" : "run");
    if (cmp) text += report::ReportCsv(*rb, "B", false);
    if (!Emit(f.csv, text)) return kExitBadInput;
  }
  if (!f.html.empty()) {
    if (!Emit(f.html, report::HtmlReport(ra, f.html, cmp ? &*cmp : nullptr))) return kExitBadInput;
    if (!stdout_taken) std::cout << "wrote " << f.html << "\n";
  }
  return 0;
}

}  // namespace ax::cli
