// adaexplore: turns slow PyTorch operators into fast, verified GPU kernels.
// The command line itself lives in app.cpp (shared with the Python package).
#include "cli/app.h"

int main(int argc, char** argv) { return ax::cli::Main(argc, argv); }
