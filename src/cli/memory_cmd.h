// `adaexplore memory show|import|export|prune`: inspect and maintain a skill
// memory file (.txt: the reference `rule||score` format; .json: the rich form).
//
//   memory show FILE [--min-score S] [--json]   rules, best first
//   memory import SRC DST                       merge SRC into DST (created if missing)
//   memory export SRC DST                       write SRC in DST's format (DST '-': text on stdout)
//   memory prune FILE [--min-score S] [--max-rules N]
//
// Exit 0 on success; 2 for bad usage or an unreadable or unwritable file,
// with a one-line message on stderr.
#pragma once

#include <CLI/CLI.hpp>

#include <limits>
#include <string>

namespace ax::cli {

struct MemoryFlags {
  std::string action;  // show, import, export, prune (set by the parser)
  std::string file;    // show, prune
  std::string src, dst;  // import, export
  double min_score = std::numeric_limits<double>::quiet_NaN();  // NaN: not given
  long long max_rules = 0;  // prune: 0 = no limit
  bool json = false;        // show
};

// Adds the `memory` subcommand (and its own subcommands) to app; *sub is set
// to it, so that `if (*sub)` tells whether it was chosen.
void RegisterMemoryCommand(CLI::App& app, MemoryFlags* f, CLI::App** sub);
int RunMemoryCommand(const MemoryFlags& f);

}  // namespace ax::cli
