// What the judging subcommands share: exit codes, the one-line failure
// message (to stderr, or to a sink that the Python bindings install), and
// the small steps from flags to a judge and a task.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cli/judge_flags.h"
#include "judge/judge.h"
#include "judge/task.h"

namespace ax::cli {

// Exit codes: 0 a verdict (or listing) was produced, whatever it says;
// 1 a command ran but found problems (e.g. invalid tasks in `tasks`);
// 2 bad usage or unreadable input; 3 the judge's environment is broken
// (no Python with torch, no GPU where one was asked for); 130 interrupted.
constexpr int kExitOk = 0;
constexpr int kExitProblems = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitEnvironment = 3;
constexpr int kExitInterrupted = 130;  // 128 + SIGINT, as shells report it

// Where Fail() sends its messages while set (nullptr: stderr, as
// "adaexplore: MESSAGE"). Process-wide; the bindings set it for one call.
using FailSink = std::function<void(const std::string& message)>;
void SetFailSink(FailSink sink);

// Checks the flags into options; says why and returns false on bad usage.
bool CheckOptions(CommonFlags* c, const JudgeFlags& f, JudgeOptions* o);

// The judge the flags name; says why and returns null when it cannot start.
std::unique_ptr<Judge> MakeJudgeOrFail(const CommonFlags& c, int workers, int max_spawns);

// One task spec that must name exactly one task; says why and returns false otherwise.
bool OneTask(const std::string& spec, TaskRef* out);

// Local time as YYYYMMDD-HHMMSS, for default run folders.
std::string Timestamp();

}  // namespace ax::cli
