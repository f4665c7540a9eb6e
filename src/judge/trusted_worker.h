// TrustedWorker: a judge worker of role "reference" on one device, and the
// tasks it has loaded. The pool keeps one per device to compare candidates'
// outputs with the reference, and one or more to measure baselines. A worker
// that dies or times out is dropped (its tasks with it) and started again on
// the next use.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "judge/device_identity.h"
#include "judge/judge.h"
#include "judge/worker.h"

namespace ax {

class TrustedWorker {
 public:
  TrustedWorker(const PoolConfig& cfg, DeviceIdentity* dev, std::string name);
  ~TrustedWorker();

  // One request at a time: every call below requires this held.
  std::mutex& mu() { return mu_; }

  // Starts the worker if it is not running (and records the device's versions).
  Status Ensure();
  // Loads the task (once per task and tolerance); *info says what it found.
  // Requires a shared hold of the device (the reference runs).
  Status EnsureTask(const TaskRef& task, const JudgeOptions& opts, TaskInfo* info);
  // A request; a failed one forgets the loaded tasks.
  Reply Request(const nlohmann::json& req, double timeout_s);
  // The device's facts, measured once per device by this worker (op
  // `device_facts`); the caller holds mu() and the device alone.
  Status Facts(double timeout_s, DeviceFacts* out);
  // Drops the worker (it is started again on the next use).
  void Reset();
  Worker* worker() { return w_.get(); }
  const std::string& name() const { return name_; }

 private:
  const PoolConfig& cfg_;
  DeviceIdentity* dev_;
  const std::string name_;
  std::mutex mu_;
  std::unique_ptr<Worker> w_;
  std::string scratch_;
  std::map<std::string, TaskInfo> tasks_;  // task hash + tolerance -> info (valid for this worker)
};

}  // namespace ax
