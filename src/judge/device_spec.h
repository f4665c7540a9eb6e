// DeviceSpec: what `--device` names. One device ("cpu", "cuda", "cuda:N"), a
// comma list of GPUs ("cuda:0,cuda:1"), or "all" (every GPU this process can
// see; on a machine without one, the CPU). Pure parsing, with the visible
// GPUs passed in, so that it is tested without a GPU.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace ax {

struct DeviceSpec {
  std::vector<std::string> devices;  // the pool's devices, "cpu" or "cuda:N", no repeats
  // What a request asks the pool for: the device itself when there is one,
  // "cuda" (the least-loaded GPU of the pool) when there are several.
  std::string request_device() const;
  bool cuda() const { return !devices.empty() && devices[0] != "cpu"; }
};

// visible_gpus: how many GPUs this process can see (VisibleGpuCount()).
// An empty spec is the default: the first GPU if there is one, else the CPU.
Status ParseDeviceSpec(const std::string& spec, int visible_gpus, DeviceSpec* out);

// The physical GPU behind "cuda:N" in this process's numbering: entry N of
// CUDA_VISIBLE_DEVICES when it is set (an index or a UUID), else N.
std::string PhysicalGpuId(const std::string& device);

// The GPUs this process can see: CUDA_VISIBLE_DEVICES when it is set (its
// entries; empty: none), else the /dev/nvidiaN device files.
int VisibleGpuCount();

}  // namespace ax
