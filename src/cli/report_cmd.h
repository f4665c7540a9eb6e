// `adaexplore report RUN [--html FILE] [--json FILE] [--csv FILE] [--vs RUN_B]`:
// the terminal summary of a run folder, and on request the HTML page, the
// JSON and CSV exports and an A/B comparison with a second run.
// Exit codes: 0 done; 2 bad usage, an unreadable run or an unwritable output
// (a one-line message on stderr).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ax::cli {

struct ReportFlags {
  std::string run;        // RUN: the folder `--out` named
  std::string vs;         // --vs RUN_B: compare RUN (A) with RUN_B (B)
  std::string html;       // --html FILE
  std::string json;       // --json FILE ("-": stdout, and no terminal summary)
  std::string csv;        // --csv FILE ("-": stdout, and no terminal summary)
  bool quiet = false;     // --quiet: no terminal summary
};

// Adds the `report` subcommand to app; *sub receives it (test `if (*sub)`).
void RegisterReportCommand(CLI::App& app, ReportFlags* flags, CLI::App** sub);
int RunReportCommand(const ReportFlags& f);

}  // namespace ax::cli
