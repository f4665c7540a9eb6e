// eval, batch and tasks: judging candidates without a search. EvaluateOne is
// also the Python bindings' evaluate().
#pragma once

#include <string>

#include "cli/judge_flags.h"
#include "judge/verdict.h"

namespace ax::cli {

// Judges one candidate file against one task. Returns the exit code
// (cli_support.h); on 0, *verdict holds the verdict (whatever it says).
int EvaluateOne(const std::string& task_spec, const std::string& candidate_path, CommonFlags& c, const JudgeFlags& f,
                Verdict* verdict);

// `eval`: EvaluateOne, printed as text or (as_json) one JSON line.
int RunEval(const std::string& task_spec, const std::string& candidate_path, CommonFlags& c, const JudgeFlags& f,
            bool as_json);

// `batch`: many (task, candidate) pairs through one pool; verdicts as JSON
// lines on stdout, throughput on stderr.
int RunBatch(const std::string& manifest, CommonFlags& c, const JudgeFlags& f, int jobs);

// `tasks`: loads and validates tasks (builds, runs, output, degenerate).
int RunTasks(const std::string& spec, CommonFlags& c, const std::string& tolerance, bool as_json);

}  // namespace ax::cli
