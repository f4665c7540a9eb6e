#include "judge/placement.h"

#include <gtest/gtest.h>

namespace ax {

TEST(Placement, LeastLoadedLowestIndexOnTies) {
  EXPECT_EQ(PickDevice({}, 0), -1);
  EXPECT_EQ(PickDevice({{0, 0, 0, 0}, {0, 0, 0, 0}}, 0), 0);
  EXPECT_EQ(PickDevice({{2, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}}, 0), 1);
}

TEST(Placement, SkipsDevicesWithoutRoom) {
  const int64_t G = int64_t{1} << 30;
  // Device 0 is less loaded but its memory is taken; device 1 has room.
  std::vector<DeviceLoad> loads = {{1, 80 * G, 70 * G, 1}, {3, 80 * G, 10 * G, 3}};
  EXPECT_EQ(PickDevice(loads, 20 * G), 1);
  // A small candidate fits on device 0.
  EXPECT_EQ(PickDevice(loads, 5 * G), 0);
}

TEST(Placement, NoRoomAnywhereFallsBackToLeastLoaded) {
  const int64_t G = int64_t{1} << 30;
  std::vector<DeviceLoad> loads = {{2, 80 * G, 79 * G, 2}, {1, 80 * G, 79 * G, 1}};
  EXPECT_EQ(PickDevice(loads, 40 * G), 1);
}

TEST(Placement, AnEmptyDeviceAlwaysHasRoom) {
  const int64_t G = int64_t{1} << 30;
  std::vector<DeviceLoad> loads = {{1, 80 * G, 70 * G, 1}, {0, 80 * G, 0, 0}};
  EXPECT_EQ(PickDevice(loads, 200 * G), 1);
}

TEST(Placement, BaselineWorkersGrowWithTheCandidatesUpToEight) {
  EXPECT_EQ(BaselineWorkers(1), 1);
  EXPECT_EQ(BaselineWorkers(4), 2);
  EXPECT_EQ(BaselineWorkers(14), 7);
  EXPECT_EQ(BaselineWorkers(64), 8);
}

}  // namespace ax
