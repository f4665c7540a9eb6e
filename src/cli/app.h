// The command line: every subcommand's flags and dispatch. The adaexplore
// binary's main() is Main(); the Python package's `adaexplore` command runs
// the same Main() through the bindings.
//
// Exit codes: see cli_support.h.
#pragma once

namespace ax::cli {

int Main(int argc, char** argv);

}  // namespace ax::cli
