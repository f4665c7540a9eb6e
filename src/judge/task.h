// Task: locating KernelBench-format problem files.
//
// A task spec is one of:
//   path/to/problem.py            a single file
//   path/to/folder                every *.py in it (sorted by numeric prefix, then name)
//   path/to/levelN/ID             problem ID of a KernelBench level folder (file "ID_*.py")
//   kernelbench:ROOT:LEVEL:ID     the same, spelled out
// Validation that the problem builds and runs happens in the judge's trusted
// worker (TaskInfo); this file only finds and reads the sources.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ax {

struct TaskRef {
  std::string path;     // absolute path of the .py file
  std::string name;     // file stem, e.g. "19_ReLU"
  std::string source;   // file contents
  std::string hash;     // sha256 of the source
};

// Resolves a spec into one or more tasks; an error names what is wrong.
Status ResolveTasks(const std::string& spec, std::vector<TaskRef>* out);

// Reads one task file; checks that it looks like a KernelBench problem
// (defines Model, get_inputs and get_init_inputs) before any process runs it.
Status ReadTask(const std::string& path, TaskRef* out);

// What the trusted worker found out about a task on a device.
struct TaskInfo {
  bool ok = false;
  std::string error;                 // one line, when !ok
  std::vector<std::string> degenerate;  // "input_independent", "zero_output_passes"
  std::string outputs_json;          // [{shape, dtype}, ...]
  int64_t footprint_bytes = 0;       // one reference forward's device memory, parameters included
  double call_ms = 0;                // one reference forward (inputs made, synchronised), warm
  // What any implementation must do at least: the FLOPs of the matrix
  // products and convolutions (torch's FLOP counter; unset when it could not
  // follow the forward), and the bytes of the inputs, weights and outputs.
  std::optional<double> flops;
  int64_t min_bytes = 0;
};

}  // namespace ax
