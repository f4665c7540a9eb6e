#include "adapt/catalogue.h"

#include <algorithm>
#include <sstream>

namespace ax::adapt {

const char* OpCategoryName(OpCategory c) {
  switch (c) {
    case OpCategory::kLayer: return "layer";
    case OpCategory::kNorm: return "norm";
    case OpCategory::kPool: return "pool";
    case OpCategory::kActivation: return "activation";
    case OpCategory::kElementwise: return "elementwise";
    case OpCategory::kReduction: return "reduction";
    case OpCategory::kReshape: return "reshape";
  }
  return "?";
}

namespace {

using C = OpCategory;

std::vector<OpSpec> BuildCatalogue() {
  const std::vector<int> any = {1, 2, 3, 4, 5};
  const std::vector<int> batched = {2, 3, 4, 5};
  const std::string same = "same shape as the input";
  const std::string reduce = "removes dimension dim (keepdim=True keeps it as size 1)";
  return {
      {"Linear", C::kLayer, batched, "nn.Linear(in_features, out_features)",
       "(*, in_features) -> (*, out_features)", "out_features 16..8192 by scale"},
      {"Conv1d", C::kLayer, {3}, "nn.Conv1d(in_channels, out_channels, kernel_size, stride, padding)",
       "(N, C, L) -> (N, out_channels, (L + 2*padding - kernel_size) // stride + 1)",
       "out_channels 4..256, kernel_size 1..7 (odd), stride 1..2, padding 0..kernel_size//2"},
      {"Conv2d", C::kLayer, {4}, "nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding)",
       "(N, C, H, W) -> (N, out_channels, (H + 2*padding - kernel_size) // stride + 1, same for W)",
       "out_channels 4..256, kernel_size 1..5 (odd), stride 1..2, padding 0..kernel_size//2"},
      {"Conv3d", C::kLayer, {5}, "nn.Conv3d(in_channels, out_channels, kernel_size, stride, padding)",
       "(N, C, D, H, W) -> (N, out_channels, (S + 2*padding - kernel_size) // stride + 1 for S in D, H, W)",
       "out_channels 4..128, kernel_size 1..3 (odd), stride 1..2, padding 0..kernel_size//2"},
      {"ConvTranspose2d", C::kLayer, {4},
       "nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding)",
       "(N, C, H, W) -> (N, out_channels, (H - 1)*stride - 2*padding + kernel_size, same for W)",
       "out_channels 4..256, kernel_size 2..4, stride 1..2, padding 0..(kernel_size-1)//2"},
      {"ConvTranspose3d", C::kLayer, {5},
       "nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride, padding)",
       "(N, C, D, H, W) -> (N, out_channels, (S - 1)*stride - 2*padding + kernel_size for S in D, H, W)",
       "out_channels 4..128, kernel_size 2..3, stride 1..2, padding 0..(kernel_size-1)//2"},
      {"BatchNorm1d", C::kNorm, {2, 3}, "nn.BatchNorm1d(num_features)", same + " ((N, C) or (N, C, L))",
       "num_features = C; training-mode statistics over N (and L)"},
      {"BatchNorm2d", C::kNorm, {4}, "nn.BatchNorm2d(num_features)", same, "num_features = C"},
      {"BatchNorm3d", C::kNorm, {5}, "nn.BatchNorm3d(num_features)", same, "num_features = C"},
      {"LayerNorm", C::kNorm, batched, "nn.LayerNorm(normalized_shape)", same + "; normalises the last dimension",
       "normalized_shape = the last dimension's size"},
      {"GroupNorm", C::kNorm, batched, "nn.GroupNorm(num_groups, num_channels)", same,
       "num_channels = C (dimension 1); num_groups divides C"},
      {"InstanceNorm2d", C::kNorm, {4}, "nn.InstanceNorm2d(num_features)", same, "num_features = C; H*W > 1"},
      {"MaxPool2d", C::kPool, {4}, "nn.MaxPool2d(kernel_size)",
       "(N, C, H, W) -> (N, C, H // kernel_size, W // kernel_size)", "kernel_size 2..3 (stride = kernel_size)"},
      {"AvgPool2d", C::kPool, {4}, "nn.AvgPool2d(kernel_size)",
       "(N, C, H, W) -> (N, C, H // kernel_size, W // kernel_size)", "kernel_size 2..3 (stride = kernel_size)"},
      {"AdaptiveAvgPool2d", C::kPool, {4}, "nn.AdaptiveAvgPool2d((output_size, output_size))",
       "(N, C, H, W) -> (N, C, output_size, output_size)", "output_size 1..min(H, W)"},
      {"ReLU", C::kActivation, any, "torch.relu(x) or nn.ReLU()", same, "none"},
      {"GELU", C::kActivation, any, "torch.nn.functional.gelu(x) or nn.GELU()", same, "none"},
      {"SiLU", C::kActivation, any, "torch.nn.functional.silu(x) or nn.SiLU()", same, "none"},
      {"Tanh", C::kActivation, any, "torch.tanh(x) or nn.Tanh()", same, "none"},
      {"Sigmoid", C::kActivation, any, "torch.sigmoid(x) or nn.Sigmoid()", same, "none"},
      {"LeakyReLU", C::kActivation, any, "torch.nn.functional.leaky_relu(x, negative_slope)", same,
       "negative_slope 0.01..0.2"},
      {"Hardswish", C::kActivation, any, "torch.nn.functional.hardswish(x) or nn.Hardswish()", same, "none"},
      {"Mish", C::kActivation, any, "torch.nn.functional.mish(x) or nn.Mish()", same, "none"},
      {"Softplus", C::kActivation, any, "torch.nn.functional.softplus(x) or nn.Softplus()", same, "none"},
      {"ELU", C::kActivation, any, "torch.nn.functional.elu(x, alpha)", same, "alpha 0.5..1.5"},
      {"Softmax", C::kActivation, batched, "torch.softmax(x, dim)", same, "dim 1..rank-1 (size 2..1024)"},
      {"LogSoftmax", C::kActivation, batched, "torch.log_softmax(x, dim)", same, "dim 1..rank-1 (size 2..1024)"},
      {"Clamp", C::kElementwise, any, "torch.clamp(x, min, max)", same, "min < max, inside the values' range"},
      {"Add", C::kElementwise, any, "x + value", same, "value 0.1..2.0"},
      {"Subtract", C::kElementwise, any, "x - value", same, "value 0.1..2.0"},
      {"Multiply", C::kElementwise, any, "x * value", same, "value 0.5..3.0"},
      {"Divide", C::kElementwise, any, "x / value", same, "value 1.5..4.0"},
      {"ResidualAdd", C::kElementwise, any, "x + earlier (an earlier tensor of the same shape)", same,
       "from: the earlier tensor"},
      {"BiasAdd", C::kElementwise, batched, "x + self.bias (nn.Parameter of shape (C, 1, ...) or (F,))", same,
       "bias over dimension 1 (the last one for rank 2)"},
      {"Mean", C::kReduction, batched, "torch.mean(x, dim, keepdim)", reduce, "dim 1..rank-1, keepdim"},
      {"Sum", C::kReduction, batched, "torch.sum(x, dim, keepdim)", reduce, "dim 1..rank-1, keepdim"},
      {"Max", C::kReduction, batched, "torch.max(x, dim, keepdim)[0]", reduce, "dim 1..rank-1, keepdim"},
      {"Amax", C::kReduction, batched, "torch.amax(x, dim, keepdim)", reduce, "dim 1..rank-1, keepdim"},
      {"LogSumExp", C::kReduction, batched, "torch.logsumexp(x, dim, keepdim)", reduce, "dim 1..rank-1, keepdim"},
      {"Flatten", C::kReshape, {3, 4, 5}, "torch.flatten(x, 1)", "(N, *rest) -> (N, prod(rest))", "none"},
  };
}

int64_t P(const OpInstance& op, const char* name, int64_t dflt) {
  auto it = op.params.find(name);
  if (it == op.params.end() || !it->is_number()) return dflt;
  return it->get<int64_t>();
}

bool Has(const OpInstance& op, const char* name) {
  auto it = op.params.find(name);
  return it != op.params.end() && it->is_number();
}

Status Bad(const OpInstance& op, const Shape& in, const std::string& why) {
  return Status::Error(op.kind + " on " + ShapeString(in) + ": " + why);
}

}  // namespace

const std::vector<OpSpec>& Catalogue() {
  static const std::vector<OpSpec> table = BuildCatalogue();
  return table;
}

const OpSpec* FindOp(const std::string& kind) {
  for (const auto& op : Catalogue()) {
    if (op.kind == kind) return &op;
  }
  return nullptr;
}

std::string DescribeOp(const OpSpec& op) {
  std::string ranks;
  for (int r : op.ranks) ranks += (ranks.empty() ? "" : "/") + std::to_string(r);
  return op.kind + ": " + op.torch + "; input rank " + ranks + "; " + op.shape_rule + "; parameters: " + op.params;
}

std::string ShapeString(const Shape& s) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  if (s.size() == 1) o << ",";
  o << ")";
  return o.str();
}

int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Status InferShape(const OpInstance& op, const Shape& in, Shape* out) {
  const OpSpec* spec = FindOp(op.kind);
  if (!spec) return Status::Error("unknown operator '" + op.kind + "'");
  const int rank = static_cast<int>(in.size());
  if (std::find(spec->ranks.begin(), spec->ranks.end(), rank) == spec->ranks.end()) {
    return Bad(op, in, "input rank " + std::to_string(rank) + " is not accepted");
  }
  for (int64_t d : in) {
    if (d < 1) return Bad(op, in, "every dimension must be at least 1");
  }
  *out = in;
  const std::string& k = op.kind;

  auto need = [&](const char* name) -> Status {
    if (!Has(op, name)) return Bad(op, in, std::string("missing parameter ") + name);
    return Status::Ok();
  };
  auto reduction_dim = [&](int64_t* dim) -> Status {
    if (Status s = need("dim"); !s.ok()) return s;
    *dim = P(op, "dim", 0);
    if (*dim < 1 || *dim >= rank) return Bad(op, in, "dim must be in 1.." + std::to_string(rank - 1));
    return Status::Ok();
  };

  if (k == "Linear") {
    if (Status s = need("out_features"); !s.ok()) return s;
    int64_t f = P(op, "out_features", 0);
    if (f < 1) return Bad(op, in, "out_features must be at least 1");
    out->back() = f;
  } else if (k.rfind("Conv", 0) == 0) {
    for (const char* p : {"out_channels", "kernel_size"}) {
      if (Status s = need(p); !s.ok()) return s;
    }
    const bool transpose = k.rfind("ConvTranspose", 0) == 0;
    int64_t oc = P(op, "out_channels", 0), ks = P(op, "kernel_size", 0);
    int64_t st = P(op, "stride", 1), pad = P(op, "padding", 0);
    if (oc < 1 || ks < 1 || st < 1 || pad < 0) return Bad(op, in, "channels, kernel and stride must be positive");
    (*out)[1] = oc;
    for (int i = 2; i < rank; ++i) {
      int64_t s = in[i];
      int64_t o = transpose ? (s - 1) * st - 2 * pad + ks : (s + 2 * pad - ks) / st + 1;
      if (!transpose && s + 2 * pad < ks) return Bad(op, in, "kernel larger than the padded input");
      if (o < 1) return Bad(op, in, "output size below 1");
      (*out)[i] = o;
    }
  } else if (k == "GroupNorm") {
    if (Status s = need("num_groups"); !s.ok()) return s;
    int64_t g = P(op, "num_groups", 0);
    if (g < 1 || in[1] % g != 0) {
      return Bad(op, in, "num_groups " + std::to_string(g) + " does not divide " + std::to_string(in[1]) + " channels");
    }
  } else if (k == "InstanceNorm2d") {
    if (in[2] * in[3] < 2) return Bad(op, in, "needs more than one spatial element");
  } else if (k.rfind("BatchNorm", 0) == 0) {
    if (NumElements(in) / in[1] < 2) return Bad(op, in, "needs more than one value per channel");
  } else if (k == "MaxPool2d" || k == "AvgPool2d") {
    if (Status s = need("kernel_size"); !s.ok()) return s;
    int64_t ks = P(op, "kernel_size", 0);
    if (ks < 1 || in[2] < ks || in[3] < ks) return Bad(op, in, "kernel_size larger than the input");
    (*out)[2] = in[2] / ks;
    (*out)[3] = in[3] / ks;
  } else if (k == "AdaptiveAvgPool2d") {
    if (Status s = need("output_size"); !s.ok()) return s;
    int64_t o = P(op, "output_size", 0);
    if (o < 1) return Bad(op, in, "output_size must be at least 1");
    (*out)[2] = o;
    (*out)[3] = o;
  } else if (k == "Softmax" || k == "LogSoftmax") {
    int64_t dim = 0;
    if (Status s = reduction_dim(&dim); !s.ok()) return s;
  } else if (spec->category == OpCategory::kReduction) {
    int64_t dim = 0;
    if (Status s = reduction_dim(&dim); !s.ok()) return s;
    bool keep = op.params.value("keepdim", false);
    if (keep) {
      (*out)[dim] = 1;
    } else {
      out->erase(out->begin() + dim);
    }
  } else if (k == "Flatten") {
    *out = {in[0], NumElements(in) / in[0]};
  } else if (k == "Clamp") {
    if (!op.params.contains("min") || !op.params.contains("max") ||
        op.params["min"].get<double>() >= op.params["max"].get<double>()) {
      return Bad(op, in, "needs min < max");
    }
  } else if (k == "ResidualAdd") {
    if (Status s = need("from"); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace ax::adapt
