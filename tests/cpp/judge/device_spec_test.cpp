#include "judge/device_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ax {

TEST(DeviceSpec, DefaultIsTheFirstGpuOrTheCpu) {
  DeviceSpec s;
  ASSERT_TRUE(ParseDeviceSpec("", 2, &s).ok());
  EXPECT_EQ(s.devices, std::vector<std::string>{"cuda:0"});
  ASSERT_TRUE(ParseDeviceSpec("", 0, &s).ok());
  EXPECT_EQ(s.devices, std::vector<std::string>{"cpu"});
  EXPECT_EQ(s.request_device(), "cpu");
}

TEST(DeviceSpec, AllIsEveryVisibleGpuOrTheCpu) {
  DeviceSpec s;
  ASSERT_TRUE(ParseDeviceSpec("all", 4, &s).ok());
  EXPECT_EQ(s.devices, (std::vector<std::string>{"cuda:0", "cuda:1", "cuda:2", "cuda:3"}));
  EXPECT_EQ(s.request_device(), "cuda");
  ASSERT_TRUE(ParseDeviceSpec("all", 0, &s).ok());
  EXPECT_EQ(s.devices, std::vector<std::string>{"cpu"});
}

TEST(DeviceSpec, Lists) {
  DeviceSpec s;
  ASSERT_TRUE(ParseDeviceSpec("cuda:1, cuda:0", 2, &s).ok());
  EXPECT_EQ(s.devices, (std::vector<std::string>{"cuda:1", "cuda:0"}));
  ASSERT_TRUE(ParseDeviceSpec("cuda", 1, &s).ok());
  EXPECT_EQ(s.devices, std::vector<std::string>{"cuda:0"});
  EXPECT_EQ(s.request_device(), "cuda:0");
}

TEST(DeviceSpec, BadSpecs) {
  DeviceSpec s;
  for (const char* bad : {"gpu", "cuda:x", "cuda:0,cuda:0", "cpu,cuda:0", "cuda:", ","}) {
    Status st = ParseDeviceSpec(bad, 2, &s);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("bad --device"), std::string::npos);
  }
}

TEST(DeviceSpec, VisibleGpusFollowCudaVisibleDevices) {
  setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);
  EXPECT_EQ(VisibleGpuCount(), 2);
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(VisibleGpuCount(), 0);
  unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace ax
