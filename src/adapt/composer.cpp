#include "adapt/composer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ax::adapt {

Status ParseSizeScale(const std::string& s, SizeScale* out) {
  if (s == "small") {
    *out = SizeScale::kSmall;
  } else if (s == "medium") {
    *out = SizeScale::kMedium;
  } else if (s == "kernelbench") {
    *out = SizeScale::kKernelBench;
  } else {
    return Status::Error("bad --size '" + s + "' (small, medium or kernelbench)");
  }
  return Status::Ok();
}

const char* SizeScaleName(SizeScale s) {
  switch (s) {
    case SizeScale::kSmall: return "small";
    case SizeScale::kMedium: return "medium";
    case SizeScale::kKernelBench: return "kernelbench";
  }
  return "?";
}

const ScaleLimits& LimitsFor(SizeScale s) {
  static const ScaleLimits small{2, 8, 3, 32, 16, 256, 16, 128, 8, 32, 4, 12, 1LL << 19, 5e7};
  static const ScaleLimits medium{4, 32, 3, 64, 64, 1024, 64, 512, 16, 64, 8, 16, 1LL << 23, 2e9};
  static const ScaleLimits kernelbench{16, 128, 3, 128, 256, 8192, 256, 4096, 32, 256, 8, 32, 1LL << 27, 2e11};
  switch (s) {
    case SizeScale::kSmall: return small;
    case SizeScale::kMedium: return medium;
    case SizeScale::kKernelBench: return kernelbench;
  }
  return small;
}

std::string ScaleLimits::Describe() const {
  std::ostringstream o;
  o << "batch " << batch_lo << " to " << batch_hi << ", channels " << channels_lo << " to " << channels_hi
    << ", feature sizes " << features_lo << " to " << features_hi << ", 1-D lengths " << length_lo << " to "
    << length_hi << ", 2-D heights/widths " << hw_lo << " to " << hw_hi << ", 3-D depths " << depth_lo << " to "
    << depth_hi << "; every tensor under " << max_elements << " elements";
  return o.str();
}

namespace {

// What is known of the values a tensor holds: enough to avoid degenerate
// chains, not a numerical analysis.
enum class VClass {
  kPos01,    // in [0, 1]: torch.rand, sigmoid
  kSym,      // centred on 0, about unit scale: randn, normalisations, tanh
  kAny,      // both signs, unknown scale: layers, residual sums
  kNonNeg,   // >= 0, unknown scale: relu, softplus
  kProb,     // a softmax: positive and small
  kNeg,      // <= 0: log_softmax
  kShifted,  // offset by a constant of unknown relation to the values
  kLarge,    // large positive: logsumexp, sums of non-negative values
};

bool Mixed(VClass v) { return v == VClass::kAny || v == VClass::kSym; }
bool Positive(VClass v) {
  return v == VClass::kPos01 || v == VClass::kNonNeg || v == VClass::kProb || v == VClass::kLarge;
}

const std::vector<int64_t> kBatch = {2, 4, 8, 16, 32, 64, 128};
const std::vector<int64_t> kChannels = {3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
const std::vector<int64_t> kFeatures = {16, 32, 64, 96, 128, 256, 384, 512, 768, 1024, 2048, 4096, 8192};
const std::vector<int64_t> kLength = {16, 32, 64, 96, 128, 256, 512, 1024, 2048, 4096};
const std::vector<int64_t> kHW = {8, 12, 16, 24, 28, 32, 48, 56, 64, 96, 112, 128, 224, 256};
const std::vector<int64_t> kDepth = {4, 6, 8, 12, 16, 24, 32};

bool IsLayer(const std::string& k) { return k == "Linear" || k.rfind("Conv", 0) == 0; }
bool LinearReduction(const std::string& k) {
  return k == "Mean" || k == "Sum" || k == "LogSumExp" || k == "AvgPool2d" || k == "AdaptiveAvgPool2d";
}

double Macs(const OpInstance& op, const Shape& in, const Shape& out) {
  if (op.kind == "Linear") return static_cast<double>(NumElements(out)) * static_cast<double>(in.back());
  if (op.kind.rfind("Conv", 0) != 0) return static_cast<double>(NumElements(out));
  double k = 1;
  for (size_t i = 2; i < in.size(); ++i) k *= static_cast<double>(op.params.value("kernel_size", 1));
  if (op.kind.rfind("ConvTranspose", 0) == 0) {
    return static_cast<double>(NumElements(in)) * static_cast<double>(op.params.value("out_channels", 1)) * k;
  }
  return static_cast<double>(NumElements(out)) * static_cast<double>(in[1]) * k;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Writes the Python: unique names for members and constants, the
// constructor's parameters in the order the layers first use them.
class Emitter {
 public:
  std::string Const(const std::string& base, const std::string& value) {
    std::string name = Unique(base);
    constants_.push_back({name, value});
    return name;
  }
  std::string Member(const std::string& base) {
    std::string name = base;
    for (int i = 2; members_.count(name); ++i) name = base + "_" + std::to_string(i);
    members_.insert(name);
    return name;
  }
  // A constant the constructor takes (added once, in first-use order).
  const std::string& Arg(const std::string& name) {
    if (std::find(args_.begin(), args_.end(), name) == args_.end()) args_.push_back(name);
    return name;
  }
  // A scalar the constructor takes and keeps as self.NAME.
  std::string Scalar(const std::string& base, double v) {
    std::string name = Arg(Const(base, Num(v)));
    init_.push_back("self." + name + " = " + name);
    return "self." + name;
  }
  void Init(const std::string& line) { init_.push_back(line); }
  void Fwd(const std::string& line) { fwd_.push_back(line); }

  std::string Render(const std::string& doc, const std::string& inputs) const {
    std::ostringstream o;
    o << "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    \"\"\"\n" << doc << "    \"\"\"\n\n";
    o << "    def __init__(self";
    for (const auto& a : args_) o << ", " << a;
    o << "):\n        super(Model, self).__init__()\n";
    for (const auto& l : init_) o << "        " << l << "\n";
    o << "\n    def forward(self, x):\n";
    for (const auto& l : fwd_) o << "        " << l << "\n";
    o << "        return x\n\n\n";
    for (const auto& [n, v] : constants_) o << n << " = " << v << "\n";
    o << "\n\ndef get_inputs():\n    return [" << inputs << "]\n\n\ndef get_init_inputs():\n    return [";
    for (size_t i = 0; i < args_.size(); ++i) o << (i ? ", " : "") << args_[i];
    o << "]\n";
    return o.str();
  }

 private:
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }
  std::vector<std::pair<std::string, std::string>> constants_;
  std::set<std::string> names_, members_;
  std::vector<std::string> args_, init_, fwd_;
};

const std::map<std::string, std::pair<std::string, std::string>>& Activations() {
  // kind -> (module spelling, functional spelling)
  static const std::map<std::string, std::pair<std::string, std::string>> m = {
      {"ReLU", {"nn.ReLU()", "torch.relu"}},
      {"GELU", {"nn.GELU()", "torch.nn.functional.gelu"}},
      {"SiLU", {"nn.SiLU()", "torch.nn.functional.silu"}},
      {"Tanh", {"nn.Tanh()", "torch.tanh"}},
      {"Sigmoid", {"nn.Sigmoid()", "torch.sigmoid"}},
      {"Hardswish", {"nn.Hardswish()", "torch.nn.functional.hardswish"}},
      {"Mish", {"nn.Mish()", "torch.nn.functional.mish"}},
      {"Softplus", {"nn.Softplus()", "torch.nn.functional.softplus"}},
  };
  return m;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::string EmitTask(const Shape& input, bool randn, const std::vector<OpInstance>& ops,
                     const std::vector<Shape>& shapes, const std::vector<bool>& module_style) {
  Emitter e;
  const int rank = static_cast<int>(input.size());
  // Names of the input's dimensions; later dimensions keep a name while
  // their size is that constant's.
  std::vector<std::string> base;
  const bool seq = rank == 3 && !ops.empty() && ops[0].kind == "Linear";
  switch (rank) {
    case 1: base = {"batch_size"}; break;
    case 2: base = {"batch_size", "in_features"}; break;
    case 3: base = seq ? std::vector<std::string>{"batch_size", "seq_len", "in_features"}
                       : std::vector<std::string>{"batch_size", "in_channels", "length"}; break;
    case 4: base = {"batch_size", "in_channels", "height", "width"}; break;
    default: base = {"batch_size", "in_channels", "depth", "height", "width"}; break;
  }
  std::vector<std::string> names;
  std::string dims;
  for (int i = 0; i < rank; ++i) {
    names.push_back(e.Const(base[i], std::to_string(input[i])));
    dims += (i ? ", " : "") + names.back();
  }
  const std::string inputs = std::string(randn ? "torch.randn(" : "torch.rand(") + dims + ")";

  // Which tensors a residual add reads, and under what name.
  std::map<int, std::string> saved;  // state index -> variable
  for (const auto& op : ops) {
    if (op.kind == "ResidualAdd") saved[op.params.value("from", 0)] = "";
  }
  int nres = 0;
  for (auto& [idx, var] : saved) var = nres++ ? "residual_" + std::to_string(nres) : "residual";

  Shape cur = input;
  auto dim_name = [&](size_t i, const std::string& b) -> std::string {
    if (names[i].empty()) names[i] = e.Const(b, std::to_string(cur[i]));
    return e.Arg(names[i]);
  };
  std::string doc_chain;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto it = saved.find(static_cast<int>(i)); it != saved.end()) e.Fwd(it->second + " = x");
    const OpInstance& op = ops[i];
    const std::string& k = op.kind;
    const Shape& out = shapes[i];
    std::vector<std::string> next(out.size());
    auto keep_same = [&] {
      // Dimensions whose size did not change keep their name.
      for (size_t d = 0; d < out.size() && d < cur.size(); ++d) next[d] = out[d] == cur[d] ? names[d] : "";
    };
    auto p = [&](const char* n) { return op.params.value(n, 0LL); };
    doc_chain += (i ? " -> " : "") + k;

    if (k == "Linear") {
      std::string in = dim_name(cur.size() - 1, "in_features");
      std::string outf = e.Arg(e.Const("out_features", std::to_string(p("out_features"))));
      std::string m = e.Member("linear");
      e.Init("self." + m + " = nn.Linear(" + in + ", " + outf + ")");
      e.Fwd("x = self." + m + "(x)");
      keep_same();
      next.back() = outf;
    } else if (k.rfind("Conv", 0) == 0) {
      const bool tr = k.rfind("ConvTranspose", 0) == 0;
      std::string in = dim_name(1, "in_channels");
      std::string oc = e.Arg(e.Const("out_channels", std::to_string(p("out_channels"))));
      std::string ks = e.Arg(e.Const("kernel_size", std::to_string(p("kernel_size"))));
      std::string call = "nn." + k + "(" + in + ", " + oc + ", " + ks;
      if (p("stride") > 1) call += ", stride=" + e.Arg(e.Const("stride", std::to_string(p("stride"))));
      if (p("padding") > 0) call += ", padding=" + e.Arg(e.Const("padding", std::to_string(p("padding"))));
      std::string m = e.Member(tr ? "conv_transpose" : "conv");
      e.Init("self." + m + " = " + call + ")");
      e.Fwd("x = self." + m + "(x)");
      keep_same();
      next[1] = oc;
    } else if (k.rfind("BatchNorm", 0) == 0 || k == "InstanceNorm2d") {
      std::string c = dim_name(1, "num_features");
      std::string m = e.Member(k == "InstanceNorm2d" ? "instance_norm" : "batch_norm");
      e.Init("self." + m + " = nn." + k + "(" + c + ")");
      e.Fwd("x = self." + m + "(x)");
      next = names;
    } else if (k == "LayerNorm") {
      std::string f = dim_name(cur.size() - 1, "norm_features");
      std::string m = e.Member("layer_norm");
      e.Init("self." + m + " = nn.LayerNorm(" + f + ")");
      e.Fwd("x = self." + m + "(x)");
      next = names;
    } else if (k == "GroupNorm") {
      std::string g = e.Arg(e.Const("num_groups", std::to_string(p("num_groups"))));
      std::string c = dim_name(1, "num_channels");
      std::string m = e.Member("group_norm");
      e.Init("self." + m + " = nn.GroupNorm(" + g + ", " + c + ")");
      e.Fwd("x = self." + m + "(x)");
      next = names;
    } else if (k == "MaxPool2d" || k == "AvgPool2d") {
      std::string ks = e.Arg(e.Const("pool_kernel_size", std::to_string(p("kernel_size"))));
      std::string m = e.Member(k == "MaxPool2d" ? "max_pool" : "avg_pool");
      e.Init("self." + m + " = nn." + k + "(kernel_size=" + ks + ")");
      e.Fwd("x = self." + m + "(x)");
      keep_same();
    } else if (k == "AdaptiveAvgPool2d") {
      std::string o = std::to_string(p("output_size"));
      std::string os = e.Arg(e.Const("output_size", "(" + o + ", " + o + ")"));
      std::string m = e.Member("adaptive_pool");
      e.Init("self." + m + " = nn.AdaptiveAvgPool2d(" + os + ")");
      e.Fwd("x = self." + m + "(x)");
      keep_same();
    } else if (Activations().count(k)) {
      const auto& [mod, fn] = Activations().at(k);
      if (i < module_style.size() && module_style[i]) {
        std::string m = e.Member(Lower(k));
        e.Init("self." + m + " = " + mod);
        e.Fwd("x = self." + m + "(x)");
      } else {
        e.Fwd("x = " + fn + "(x)");
      }
      next = names;
    } else if (k == "LeakyReLU") {
      std::string s = e.Scalar("negative_slope", op.params.value("negative_slope", 0.01));
      e.Fwd("x = torch.nn.functional.leaky_relu(x, negative_slope=" + s + ")");
      next = names;
    } else if (k == "ELU") {
      std::string a = e.Scalar("alpha", op.params.value("alpha", 1.0));
      e.Fwd("x = torch.nn.functional.elu(x, alpha=" + a + ")");
      next = names;
    } else if (k == "Softmax" || k == "LogSoftmax") {
      e.Fwd(std::string("x = ") + (k == "Softmax" ? "torch.softmax" : "torch.log_softmax") + "(x, dim=" +
            std::to_string(p("dim")) + ")");
      next = names;
    } else if (k == "Clamp") {
      std::string lo = e.Scalar("clamp_min", op.params.value("min", 0.0));
      std::string hi = e.Scalar("clamp_max", op.params.value("max", 1.0));
      e.Fwd("x = torch.clamp(x, min=" + lo + ", max=" + hi + ")");
      next = names;
    } else if (k == "Add" || k == "Subtract" || k == "Multiply" || k == "Divide") {
      static const std::map<std::string, std::pair<std::string, std::string>> sym = {
          {"Add", {"+", "add_value"}}, {"Subtract", {"-", "subtract_value"}},
          {"Multiply", {"*", "scaling_factor"}}, {"Divide", {"/", "divisor"}}};
      const auto& [opch, nm] = sym.at(k);
      std::string v = e.Scalar(nm, op.params.value("value", 1.0));
      e.Fwd("x = x " + opch + " " + v);
      next = names;
    } else if (k == "ResidualAdd") {
      e.Fwd("x = x + " + saved.at(op.params.value("from", 0)));
      next = names;
    } else if (k == "BiasAdd") {
      std::string shape;
      if (cur.size() == 2) {
        shape = "(" + dim_name(1, "bias_features") + ",)";
      } else {
        shape = "(" + dim_name(1, "bias_channels");
        for (size_t d = 2; d < cur.size(); ++d) shape += ", 1";
        shape += ")";
      }
      std::string bs = e.Arg(e.Const("bias_shape", shape));
      std::string m = e.Member("bias");
      e.Init("self." + m + " = nn.Parameter(torch.randn(" + bs + "))");
      e.Fwd("x = x + self." + m);
      next = names;
    } else if (k == "Mean" || k == "Sum" || k == "Max" || k == "Amax" || k == "LogSumExp") {
      static const std::map<std::string, std::string> fn = {
          {"Mean", "torch.mean"}, {"Sum", "torch.sum"}, {"Max", "torch.max"}, {"Amax", "torch.amax"},
          {"LogSumExp", "torch.logsumexp"}};
      const int64_t dim = p("dim");
      const bool keep = op.params.value("keepdim", false);
      std::string call = fn.at(k) + "(x, dim=" + std::to_string(dim) + (keep ? ", keepdim=True)" : ")");
      if (k == "Max") call += "[0]";
      e.Fwd("x = " + call);
      next = names;
      if (keep) {
        next[dim] = "";
      } else {
        next.erase(next.begin() + dim);
      }
    } else if (k == "Flatten") {
      e.Fwd("x = torch.flatten(x, 1)");
      next = {names[0], ""};
    }
    names = next;
    cur = out;
  }
  std::string doc = "    " + doc_chain + ".\n    Input " + ShapeString(input) + ", output " +
                    ShapeString(shapes.empty() ? input : shapes.back()) + ".\n";
  return e.Render(doc, inputs);
}

struct Composer::State {
  Shape shape;
  VClass v = VClass::kPos01;
  bool normalized = false;  // a norm or softmax since the last nonlinearity
  bool clamped = false;     // a clamp since the last layer, norm or softmax: a max would saturate
  bool large = false;       // magnitudes may be large (a sum): tanh and sigmoid would saturate
  int layers = 0;           // Linear/Conv layers so far
};

Composer::Composer(SizeScale scale, uint64_t seed, int min_ops, int max_ops)
    : scale_(scale), lim_(LimitsFor(scale)), min_ops_(min_ops), max_ops_(max_ops), rng_(seed) {}

int64_t Composer::Pick(const std::vector<int64_t>& nice, int64_t lo, int64_t hi) {
  std::vector<int64_t> ok;
  for (int64_t v : nice) {
    if (v >= lo && v <= hi) ok.push_back(v);
  }
  if (ok.empty()) return lo;
  return ok[Below(ok.size())];
}

bool Composer::Applicable(const std::string& k, const std::vector<State>& states, int step) const {
  const State& s = states.back();
  const Shape& x = s.shape;
  const int rank = static_cast<int>(x.size());
  const OpSpec* spec = FindOp(k);
  if (!spec || std::find(spec->ranks.begin(), spec->ranks.end(), rank) == spec->ranks.end()) return false;
  if (IsLayer(k)) {
    if (s.layers >= 2) return false;
    if (k == "Linear") return rank <= 3;
    for (int i = 2; i < rank; ++i) {
      if (x[i] < 3) return false;
    }
    return true;
  }
  if (s.normalized && LinearReduction(k)) return false;
  if (s.clamped && (k == "Max" || k == "Amax")) return false;
  auto spatial = [&] { return NumElements(x) / x[0] / x[1]; };
  if (k == "ReLU") return Mixed(s.v);
  // Of values that may all be well below zero (log-probabilities, offsets),
  // these are all (nearly) zero or constant.
  if ((s.v == VClass::kNeg || s.v == VClass::kShifted) && (k == "GELU" || k == "Hardswish" || k == "Softplus")) {
    return s.v == VClass::kShifted && k == "Softplus";
  }
  // A sum of many negative values saturates whatever follows.
  if (k == "Sum" && (s.v == VClass::kNeg || s.v == VClass::kShifted)) return false;
  if (k == "Clamp") return s.v == VClass::kSym || s.v == VClass::kPos01;
  if (k == "Tanh" || k == "Sigmoid") return s.v != VClass::kLarge && !s.large;
  if (k.rfind("BatchNorm", 0) == 0) return NumElements(x) / x[1] >= 4;
  if (k == "LayerNorm") return x.back() >= 4;
  if (k == "GroupNorm") return x[1] >= 2 && spatial() * x[1] >= 4;
  if (k == "InstanceNorm2d") return x[2] * x[3] >= 4;
  if (k == "MaxPool2d" || k == "AvgPool2d") return x[2] >= 4 && x[3] >= 4;
  if (k == "AdaptiveAvgPool2d") return x[2] >= 2 && x[3] >= 2;
  if (k == "Softmax" || k == "LogSoftmax" || spec->category == OpCategory::kReduction) {
    for (int d = 1; d < rank; ++d) {
      if (x[d] >= 2 && x[d] <= 1024) return true;
      if (spec->category == OpCategory::kReduction && x[d] >= 2) return true;
    }
    return false;
  }
  if (k == "ResidualAdd") {
    for (int j = 0; j + 1 < static_cast<int>(states.size()); ++j) {
      if (states[j].shape == x && static_cast<int>(states.size()) - 1 - j >= 2) return true;
    }
    return false;
  }
  if (k == "BiasAdd") return rank >= 2;
  return true;
}

bool Composer::Sample(const std::string& k, const std::vector<State>& states, OpInstance* op) {
  const Shape& x = states.back().shape;
  const int rank = static_cast<int>(x.size());
  op->kind = k;
  op->params = nlohmann::json::object();
  auto& p = op->params;
  if (k == "Linear") {
    p["out_features"] = Pick(kFeatures, lim_.features_lo, lim_.features_hi);
  } else if (k.rfind("Conv", 0) == 0) {
    const bool tr = k.rfind("ConvTranspose", 0) == 0;
    p["out_channels"] = Pick(kChannels, std::max<int64_t>(4, lim_.channels_lo), lim_.channels_hi);
    int64_t ks;
    if (tr) {
      ks = rank == 5 ? 2 + Below(2) : 2 + Below(3);
    } else if (rank == 5) {
      ks = Coin(0.8) ? 3 : 1;
    } else if (rank == 3) {
      ks = 3 + 2 * Below(3);
    } else {
      ks = Coin(0.7) ? 3 : (Coin(0.5) ? 1 : 5);
    }
    p["kernel_size"] = ks;
    p["stride"] = Coin(0.75) ? 1 : 2;
    int64_t maxpad = tr ? (ks - 1) / 2 : ks / 2;
    p["padding"] = (maxpad > 0 && Coin(0.5)) ? maxpad : 0;
  } else if (k == "GroupNorm") {
    std::vector<int64_t> ok;
    const int64_t c = x[1], spatial = NumElements(x) / x[0] / c;
    for (int64_t g = 2; g <= c && g <= 32; ++g) {
      if (c % g == 0 && (c / g) * spatial >= 4) ok.push_back(g);
    }
    if (ok.empty()) {
      ok.push_back(1);
    }
    p["num_groups"] = ok[Below(ok.size())];
  } else if (k == "MaxPool2d" || k == "AvgPool2d") {
    int64_t ks = (Coin(0.7) || std::min(x[2], x[3]) < 6) ? 2 : 3;
    p["kernel_size"] = ks;
  } else if (k == "AdaptiveAvgPool2d") {
    int64_t m = std::min(x[2], x[3]) / 2;
    p["output_size"] = (m < 2 || Coin(0.5)) ? 1 : 2 + static_cast<int64_t>(Below(std::min<int64_t>(m, 8) - 1));
  } else if (k == "LeakyReLU") {
    static const double v[] = {0.01, 0.05, 0.1, 0.2};
    p["negative_slope"] = v[Below(4)];
  } else if (k == "ELU") {
    static const double v[] = {0.5, 1.0, 1.5};
    p["alpha"] = v[Below(3)];
  } else if (k == "Softmax" || k == "LogSoftmax") {
    std::vector<int64_t> dims;
    for (int d = 1; d < rank; ++d) {
      if (x[d] >= 2 && x[d] <= 1024) dims.push_back(d);
    }
    if (dims.empty()) return false;
    p["dim"] = dims[Below(dims.size())];
  } else if (FindOp(k)->category == OpCategory::kReduction) {
    std::vector<int64_t> dims;
    for (int d = 1; d < rank; ++d) {
      if (x[d] >= 2) dims.push_back(d);
    }
    if (dims.empty()) return false;
    p["dim"] = dims[Below(dims.size())];
    p["keepdim"] = Coin(0.4);
  } else if (k == "Clamp") {
    if (states.back().v == VClass::kSym) {
      double a = Coin(0.5) ? 0.5 : 1.0;
      p["min"] = -a;
      p["max"] = a;
    } else {
      p["min"] = Coin(0.5) ? 0.2 : 0.3;
      p["max"] = Coin(0.5) ? 0.7 : 0.8;
    }
  } else if (k == "Add" || k == "Subtract") {
    static const double v[] = {0.1, 0.25, 0.5, 1.0, 2.0};
    p["value"] = v[Below(5)];
  } else if (k == "Multiply") {
    static const double v[] = {0.5, 1.5, 2.0, 3.0};
    p["value"] = v[Below(4)];
  } else if (k == "Divide") {
    static const double v[] = {1.5, 2.0, 3.0, 4.0};
    p["value"] = v[Below(4)];
  } else if (k == "ResidualAdd") {
    std::vector<int> from;
    for (int j = 0; j + 1 < static_cast<int>(states.size()); ++j) {
      if (states[j].shape == x && static_cast<int>(states.size()) - 1 - j >= 2) from.push_back(j);
    }
    if (from.empty()) return false;
    p["from"] = from[Below(from.size())];
  }
  return true;
}

bool Composer::TryChain(ComposedTask* out) {
  // The family: the input's rank, and the layers that start such chains.
  static const std::vector<std::pair<int, double>> families = {{2, 3}, {3, 1.5}, {4, 3}, {5, 1.5}};
  double total = 0;
  for (auto& f : families) total += f.second;
  double r = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
  int rank = 4;
  for (auto& f : families) {
    if ((r -= f.second) < 0) {
      rank = f.first;
      break;
    }
  }
  Shape in;
  const int64_t batch = Pick(kBatch, lim_.batch_lo, lim_.batch_hi);
  const bool starts_with_linear3 = rank == 3 && Coin(0.3);
  switch (rank) {
    case 2: in = {batch, Pick(kFeatures, lim_.features_lo, lim_.features_hi)}; break;
    case 3:
      if (starts_with_linear3) {
        in = {batch, Pick(kLength, lim_.length_lo, lim_.length_hi) / 4,
              Pick(kFeatures, lim_.features_lo, lim_.features_hi)};
      } else {
        in = {batch, Pick(kChannels, lim_.channels_lo, lim_.channels_hi), Pick(kLength, lim_.length_lo, lim_.length_hi)};
      }
      break;
    case 4: {
      int64_t h = Pick(kHW, lim_.hw_lo, lim_.hw_hi);
      in = {batch, Pick(kChannels, lim_.channels_lo, lim_.channels_hi), h, Coin(0.8) ? h : Pick(kHW, lim_.hw_lo, lim_.hw_hi)};
      break;
    }
    default: {
      int64_t h = Pick(kHW, lim_.hw_lo, std::min(lim_.hw_hi, lim_.hw_hi / 2 < 16 ? lim_.hw_hi : lim_.hw_hi / 2));
      in = {batch, Pick(kChannels, lim_.channels_lo, lim_.channels_hi), Pick(kDepth, lim_.depth_lo, lim_.depth_hi), h, h};
      break;
    }
  }
  if (NumElements(in) > lim_.max_elements) return false;
  const bool randn = Coin(0.4);

  std::vector<State> states(1);
  states[0].shape = in;
  states[0].v = randn ? VClass::kSym : VClass::kPos01;
  const int n = min_ops_ + static_cast<int>(Below(static_cast<uint64_t>(max_ops_ - min_ops_ + 1)));

  std::vector<OpInstance> ops;
  std::vector<Shape> shapes;
  std::vector<bool> styles;
  for (int step = 0; step < n; ++step) {
    std::vector<std::pair<std::string, double>> choices;
    for (const auto& spec : Catalogue()) {
      const std::string& k = spec.kind;
      if (!ops.empty() && ops.back().kind == k) continue;
      if (!Applicable(k, states, step)) continue;
      double w = 1;
      switch (spec.category) {
        case OpCategory::kLayer: w = step == 0 ? 150 : 0.6; break;  // most chains start with a layer
        case OpCategory::kNorm: w = 1.2; break;
        case OpCategory::kPool: w = 1.2; break;
        case OpCategory::kActivation: w = 1; break;
        case OpCategory::kElementwise: w = 0.9; break;
        case OpCategory::kReduction: w = step == 0 ? 0.2 : 0.8; break;
        case OpCategory::kReshape: w = 0.4; break;
      }
      if (step == 0 && starts_with_linear3 && k != "Linear" && spec.category == OpCategory::kLayer) continue;
      if (step == 0 && rank == 3 && !starts_with_linear3 && k == "Linear") continue;
      choices.push_back({k, w});
    }
    bool placed = false;
    for (int attempt = 0; attempt < 8 && !choices.empty() && !placed; ++attempt) {
      double sum = 0;
      for (auto& c : choices) sum += c.second;
      double t = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * sum;
      size_t pick = choices.size() - 1;
      for (size_t i = 0; i < choices.size(); ++i) {
        if ((t -= choices[i].second) < 0) {
          pick = i;
          break;
        }
      }
      OpInstance op;
      if (!Sample(choices[pick].first, states, &op)) continue;
      Shape next;
      if (!InferShape(op, states.back().shape, &next).ok()) continue;
      if (NumElements(next) > lim_.max_elements || Macs(op, states.back().shape, next) > lim_.max_macs) continue;
      State s = states.back();
      Advance(op, next, &s);
      if (op.kind == "ResidualAdd") {
        // The sum's sign is only known when both sides agree.
        const VClass a = states.back().v, b = states[op.params.value("from", 0)].v;
        if (Mixed(a) && Mixed(b)) {
          s.v = VClass::kAny;
        } else if (Positive(a) && Positive(b)) {
          s.v = VClass::kNonNeg;
        } else if ((Mixed(a) && Positive(b)) || (Positive(a) && Mixed(b))) {
          s.v = VClass::kAny;
        } else {
          s.v = VClass::kShifted;
        }
      }
      states.push_back(s);
      ops.push_back(op);
      shapes.push_back(next);
      styles.push_back(Coin(0.4));
      placed = true;
    }
    if (!placed) return false;
  }
  // A chain that ends on a bare shift or scale of a normalised tensor, or
  // leaves only a few values per sample, is not worth a kernel.
  if (NumElements(shapes.back()) < 2 * in[0] && ops.size() < 4) return false;

  out->input = in;
  out->ops = ops;
  out->shapes = shapes;
  out->name.clear();
  for (const auto& op : ops) out->name += (out->name.empty() ? "" : "_") + op.kind;
  out->source = EmitTask(in, randn, ops, shapes, styles);
  return true;
}

void Composer::Advance(const OpInstance& op, const Shape& out, State* s) {
  const std::string& k = op.kind;
  const OpSpec* spec = FindOp(k);
  const VClass v = s->v;
  s->shape = out;
  if (k == "Clamp") s->clamped = true;
  if (k == "Sum" || k == "LogSumExp") s->large = true;
  if (spec->category == OpCategory::kNorm || k == "Softmax" || k == "Clamp") s->large = false;
  if (spec->category == OpCategory::kLayer || spec->category == OpCategory::kNorm || k == "Softmax" ||
      k == "LogSoftmax" || k == "ResidualAdd") {
    s->clamped = false;
  }
  switch (spec->category) {
    case OpCategory::kLayer:
      s->v = VClass::kAny;
      s->normalized = false;
      ++s->layers;
      return;
    case OpCategory::kNorm:
      s->v = VClass::kSym;
      s->normalized = true;
      return;
    case OpCategory::kPool:
      if (k == "MaxPool2d") s->normalized = false;
      if (k != "MaxPool2d" && Mixed(v)) s->v = VClass::kShifted;  // see Mean below
      return;
    case OpCategory::kReshape:
      return;
    default:
      break;
  }
  if (k == "Softmax") {
    s->v = VClass::kProb;
    s->normalized = true;
  } else if (k == "LogSoftmax") {
    s->v = VClass::kNeg;
    s->normalized = true;
  } else if (spec->category == OpCategory::kActivation) {
    // Of probabilities (small values), activations are nearly linear: their
    // sums over the softmax's dimension stay constant.
    if (v != VClass::kProb) s->normalized = false;
    if (k == "ReLU" || k == "Softplus") {
      s->v = VClass::kNonNeg;
    } else if (k == "Sigmoid") {
      // Spread over (0, 1) only when the input had both signs.
      s->v = Mixed(v) ? VClass::kPos01 : VClass::kNonNeg;
    } else if (k == "Tanh") {
      // Of positive values: in [0, 1) but not spread over it (tanh of
      // probabilities is tiny), so no clamp inside [0, 1] is safe after it.
      s->v = Positive(v) ? VClass::kNonNeg : Mixed(v) ? VClass::kSym : v;
    } else if (v == VClass::kLarge) {
      // Near the identity for large positive values: still large.
    } else {
      // Negative or offset values stay so (gelu, silu, elu... keep the sign).
      s->v = Positive(v) ? VClass::kNonNeg : Mixed(v) ? VClass::kAny : v;
    }
  } else if (k == "Clamp") {
    s->normalized = false;
  } else if (k == "Add" || k == "Subtract" || k == "BiasAdd") {
    // An affine shift keeps a normalised tensor's sums constant. Shifted
    // log-probabilities are still treated as negative: the stricter rules.
    if (v != VClass::kLarge && v != VClass::kNeg) s->v = VClass::kShifted;
  } else if (k == "Multiply" || k == "Divide") {
    if (v == VClass::kPos01 || v == VClass::kSym) s->v = Positive(v) ? VClass::kNonNeg : VClass::kAny;
  } else if (k == "ResidualAdd") {
    s->v = VClass::kAny;
    s->normalized = false;
  } else if (k == "LogSumExp") {
    s->v = VClass::kLarge;
    s->normalized = false;
  } else if (k == "Sum") {
    // Averages and sums of centred values lose their spread around zero: a
    // layer's bias can put every one of them on the same side.
    s->v = Positive(v) ? VClass::kLarge : Mixed(v) ? VClass::kShifted : v;
  } else if (k == "Mean") {
    s->v = Positive(v) ? VClass::kNonNeg : Mixed(v) ? VClass::kShifted : v;
  } else if (k == "Max" || k == "Amax") {
    // The largest of many centred values: one-signed and concentrated.
    s->v = v == VClass::kPos01 ? VClass::kNonNeg : Positive(v) ? v : Mixed(v) ? VClass::kShifted : v;
    s->normalized = false;
  }
}

Status Composer::Next(ComposedTask* out) {
  for (int i = 0; i < 500; ++i) {
    if (TryChain(out)) return Status::Ok();
  }
  return Status::Error(std::string("no consistent chain of ") + std::to_string(min_ops_) + " to " +
                       std::to_string(max_ops_) + " operators found within the " + SizeScaleName(scale_) +
                       " size limits");
}

}  // namespace ax::adapt
