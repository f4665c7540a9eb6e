// Placement: which device of the local judge pool takes the next candidate,
// and how many baseline workers a device gets.
// Pure decisions over a snapshot of the devices' loads, so that they are
// deterministic and tested without workers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ax {

struct DeviceLoad {
  int in_flight = 0;          // candidates queued or being judged there
  int64_t budget = 0;         // memory gate budget (0: no gate, e.g. the CPU)
  int64_t reserved = 0;       // memory reserved by the candidates running there
  int holders = 0;            // candidates holding a reservation
};

// The least-loaded device among those with room for `estimate` bytes (a
// device with nothing running always has room); when none has room, the
// least-loaded of all (the candidate then waits at that device's gate). Ties
// go to the lowest index. -1 only for an empty list.
int PickDevice(const std::vector<DeviceLoad>& loads, int64_t estimate);

// Baseline workers of a device for `workers` candidates in flight there: one
// per two, at most eight. A torch.compile takes tens of seconds of host time
// and a worker compiles one task at a time, so with fewer a many-task bench
// waits on its baselines while the GPU idles; each worker keeps its tasks'
// models and compiled graphs, which bounds them from above.
inline int BaselineWorkers(int workers) { return std::clamp(workers / 2, 1, 8); }

}  // namespace ax
