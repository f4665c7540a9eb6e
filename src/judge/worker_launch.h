// Starting the local pool's judge workers: the settings every worker of a
// device shares, and a start that waits for the worker's "ready" line and
// turns a failed start into a one-line reason.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "judge/judge.h"
#include "judge/worker.h"

namespace ax {

inline constexpr const char* kRoleTrusted = "reference";
inline constexpr const char* kRoleCandidate = "candidate";

// A worker's configuration for `device` and `role` (scratch left empty).
WorkerConfig JudgeWorkerConfig(const PoolConfig& cfg, const std::string& device, const std::string& role);

// Starts a worker and waits for it to say ready (or for *cancel). Null, with
// *error set to the reason (the last line of a Python traceback included),
// when it does not start.
std::unique_ptr<Worker> StartJudgeWorker(const WorkerConfig& wc, double timeout_s, std::string* error,
                                         const std::atomic<bool>* cancel = nullptr);

// The last n bytes of s.
std::string TailOf(const std::string& s, size_t n);

}  // namespace ax
