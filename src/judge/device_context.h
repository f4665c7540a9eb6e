// DeviceContext: everything the local judge pool runs on one device: its
// identity and memory gate, the execution lock (correctness trials share the
// device with each other; timing and baselines hold it alone, also against
// other adaexplore processes on the same device: DeviceLock), the trusted
// reference worker, the baseline workers, the output hand-over and the warm
// candidate workers.
#pragma once

#include <atomic>
#include <shared_mutex>
#include <string>

#include "judge/baseline_service.h"
#include "judge/device_identity.h"
#include "judge/device_lock.h"
#include "judge/judge.h"
#include "judge/judge_cache.h"
#include "judge/output_transfer.h"
#include "judge/placement.h"
#include "judge/trusted_worker.h"
#include "judge/warm_pool.h"

namespace ax {

struct DeviceContext {
  // workers: candidates in flight on this device.
  DeviceContext(const PoolConfig& cfg, const std::string& device, int workers, JudgeCache* cache,
                const std::atomic<bool>* stop)
      : id(device),
        exec_mu(DeviceLockFile(device)),
        ref(cfg, &id, "reference"),
        baselines(cfg, &id, cache, &exec_mu, BaselineWorkers(workers)),
        transfer(device),
        warm(cfg, device, workers, stop) {}

  DeviceIdentity id;
  DeviceLock exec_mu;  // shared with the other adaexplore processes on this device
  TrustedWorker ref;
  BaselineService baselines;
  OutputTransfer transfer;
  WarmPool warm;
};

}  // namespace ax
