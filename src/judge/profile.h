// Profile: where a timed candidate's GPU time went (each kernel's time and
// share of the busy time), how close the whole came to the device's measured
// limits (a roofline from the task's least bytes and FLOPs), and the device
// facts those fractions are taken against. Pure data and arithmetic: the
// judge fills it, verdicts and the run store keep it, prompts and reports
// show it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "judge/task.h"

namespace ax {

// The device as measured by its trusted worker (op `device_facts`).
struct DeviceFacts {
  std::string name;          // "NVIDIA H200", or the CPU's name
  int sms = 0;               // streaming multiprocessors (CPU: cores)
  int64_t memory_bytes = 0;
  double copy_gbps = 0;      // a large device-to-device copy, read + write bytes per second / 1e9
  double fp32_tflops = 0;    // an fp32 matrix product (no TF32)
  double tf32_tflops = 0;    // the same product on TF32 tensor cores (GPU; 0: not measured)

  // The fastest fp32-accurate matrix-product rate: plain fp32, or the tensor
  // cores used three times per product (3xTF32), a third of the TF32 rate.
  double AccurateTflops() const { return tf32_tflops / 3 > fp32_tflops ? tf32_tflops / 3 : fp32_tflops; }

  nlohmann::json ToJson() const;
  static bool FromJson(const nlohmann::json& j, DeviceFacts* out);  // false: not a facts object
  // "NVIDIA H200 (132 SMs, 140 GB, measured copy bandwidth 4.0 TB/s, fp32 matmul 51 TFLOP/s)"
  std::string Describe() const;
};

// The prompts' line about the device ({{hardware}}): "an " + Describe() of
// measured GPU facts; on the CPU a fixed line (kernels run in Triton's
// interpreter, timings are CPU figures); "an NVIDIA GPU" for a GPU whose
// facts are unknown (null or nameless).
std::string HardwareLine(bool cuda, const DeviceFacts* facts);

struct KernelTime {
  std::string name;
  double ms = 0;      // summed over its launches in one call
  double share = 0;   // of the call's busy time, 0..1
  int launches = 0;
};

// The call as a whole against the device's peaks.
struct Roofline {
  double flops = 0;            // the task's matrix products and convolutions
  double bytes = 0;            // its inputs, weights and outputs, once
  double gbps = 0;             // bytes / busy time
  double tflops = 0;           // flops / busy time
  double bandwidth_fraction = 0;  // of the measured copy bandwidth
  double flops_fraction = 0;      // of DeviceFacts::AccurateTflops()
  std::string bound;           // "memory" or "compute": which side of the ridge the task's intensity is
  double peak_gbps = 0;        // the device's measured peaks the fractions are of
  double peak_tflops = 0;
};

struct Profile {
  double busy_ms = 0;                 // the sum of the GPU activities' durations, one call
  std::vector<KernelTime> kernels;    // longest first
  std::optional<Roofline> roofline;   // where the device's peaks and the task's bytes are known

  nlohmann::json ToJson() const;
  static Profile FromJson(const nlohmann::json& j);  // missing keys keep defaults
  // One line for prompts and tables:
  // "2 kernels; `_fused_gelu` 71% of 1.84 ms; 38% of copy bandwidth (memory-bound)".
  std::string Summary() const;
};

// From the worker's `gpu_kernel_times` ([{name, ms, launches}] of the median
// call), the task's least bytes and FLOPs, and the device's facts (null: no
// roofline). Shares are of the kernels' own sum, which is that call's busy time.
Profile MakeProfile(const nlohmann::json& kernel_times, const TaskInfo& task, const DeviceFacts* facts);

}  // namespace ax
