#include "judge/placement.h"

namespace ax {

namespace {
bool HasRoom(const DeviceLoad& d, int64_t estimate) {
  return d.budget == 0 || d.holders == 0 || d.reserved + estimate <= d.budget;
}
}  // namespace

int PickDevice(const std::vector<DeviceLoad>& loads, int64_t estimate) {
  int best = -1, best_any = -1;
  for (int i = 0; i < static_cast<int>(loads.size()); ++i) {
    const DeviceLoad& d = loads[i];
    if (best_any < 0 || d.in_flight < loads[best_any].in_flight) best_any = i;
    if (HasRoom(d, estimate) && (best < 0 || d.in_flight < loads[best].in_flight)) best = i;
  }
  return best >= 0 ? best : best_any;
}

}  // namespace ax
