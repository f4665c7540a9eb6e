// Composer: synthesises KernelBench-format tasks without an LLM, by chaining
// 3 to 6 catalogue operators whose shapes fit, with random (seeded) sizes.
//
// Besides shapes, it tracks a coarse class of the values flowing through the
// chain (probabilities, non-negative, centred...) and whether a normalisation
// was applied since the last nonlinearity, so that it does not build chains
// the judge would call degenerate (a ReLU of all-negative values, a mean over
// a just-normalised dimension, a tanh of values that all saturate).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "adapt/catalogue.h"
#include "common/status.h"

namespace ax::adapt {

// How large the generated tensors are. small: CPU-friendly (each tensor under
// 512K elements); medium: under 8M; kernelbench: KernelBench Level-2 sizes
// (under 128M elements).
enum class SizeScale { kSmall, kMedium, kKernelBench };
Status ParseSizeScale(const std::string& s, SizeScale* out);
const char* SizeScaleName(SizeScale s);

struct ScaleLimits {
  int64_t batch_lo, batch_hi;
  int64_t channels_lo, channels_hi;
  int64_t features_lo, features_hi;
  int64_t length_lo, length_hi;
  int64_t hw_lo, hw_hi;
  int64_t depth_lo, depth_hi;
  int64_t max_elements;  // per tensor
  double max_macs;       // per layer
  std::string Describe() const;  // for the LLM prompt
};
const ScaleLimits& LimitsFor(SizeScale s);

struct ComposedTask {
  std::string name;             // "Conv2d_GroupNorm_GELU" (the file name without its index)
  std::string source;           // the task file
  Shape input;
  std::vector<OpInstance> ops;
  std::vector<Shape> shapes;    // shapes[i]: the output of ops[i]
};

class Composer {
 public:
  Composer(SizeScale scale, uint64_t seed, int min_ops = 3, int max_ops = 6);
  // Draws a new chain and writes its task file. Fails only when no consistent
  // chain was found in many tries (e.g. limits too tight for min_ops).
  Status Next(ComposedTask* out);

 private:
  struct State;
  bool TryChain(ComposedTask* out);
  bool Applicable(const std::string& kind, const std::vector<State>& states, int step) const;
  bool Sample(const std::string& kind, const std::vector<State>& states, OpInstance* op);
  // The value class and normalisation flag after an operator.
  static void Advance(const OpInstance& op, const Shape& out, State* s);
  int64_t Pick(const std::vector<int64_t>& nice, int64_t lo, int64_t hi);
  uint64_t Below(uint64_t n) { return rng_() % n; }
  bool Coin(double p) { return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) < p; }

  SizeScale scale_;
  ScaleLimits lim_;
  int min_ops_, max_ops_;
  std::mt19937_64 rng_;
};

// Writes the KernelBench file for a chain (exposed for tests): module-level
// size constants, Model with its layers created in chain order, get_inputs()
// and get_init_inputs(). `styles` picks module (true) or functional (false)
// spelling per activation; `randn` makes inputs with torch.randn.
std::string EmitTask(const Shape& input, bool randn, const std::vector<OpInstance>& ops,
                     const std::vector<Shape>& shapes, const std::vector<bool>& module_style);

}  // namespace ax::adapt
