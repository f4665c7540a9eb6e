// BaselineService: eager PyTorch and torch.compile timed on one device with
// the candidates' own timing loop, in trusted workers of their own, cached per
// task, GPU model, torch version and timing protocol. A task always goes to
// the same baseline worker, so that a torch.compile of one task never holds up
// another's, and several tasks compile at once.
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judge/device_identity.h"
#include "judge/device_lock.h"
#include "judge/judge.h"
#include "judge/judge_cache.h"
#include "judge/trusted_worker.h"

namespace ax {

struct Baseline {
  double median_ms = 0;
  double wall_ms = 0;  // the parent's clock for the whole timing request
  double gap_ms = 0;   // median of (device-wide end - stream end)
  nlohmann::json ToJson() const;
};

class BaselineService {
 public:
  // exec_mu: the device's execution lock (timing holds it alone).
  BaselineService(const PoolConfig& cfg, DeviceIdentity* dev, JudgeCache* cache, DeviceLock* exec_mu,
                  int workers);

  // One baseline (mode "eager" or "compile"). Requires nothing held.
  Status Ensure(const TaskRef& task, const JudgeOptions& o, const std::string& mode, Baseline* out);
  // The task's baselines for a verdict; a baseline that fails (torch.compile
  // cannot handle the model, say) is flagged on the verdict.
  std::map<std::string, Baseline> ForVerdict(const TaskRef& task, const JudgeOptions& o, Verdict* v);

 private:
  const PoolConfig& cfg_;
  DeviceIdentity* dev_;
  JudgeCache* cache_;
  DeviceLock* exec_mu_;
  std::vector<std::unique_ptr<TrustedWorker>> workers_;
};

}  // namespace ax
