// Convolutions, lowering: which graph nodes are convolutions the compiler
// generates (modules and F.conv*), their geometry and GEMM view, and their
// first tile configuration. Emission is conv.cpp.
#include <algorithm>
#include <functional>
#include <numeric>

#include "builtin/conv.h"

namespace ax::builtin {

using json = nlohmann::json;

namespace {

// A module attribute that is an int or a list of ints, as `dims` values.
bool PerDim(const json& attrs, const char* key, int dims, std::vector<int64_t>* out) {
  if (!attrs.contains(key)) return false;
  const json& v = attrs[key];
  out->clear();
  if (v.is_number_integer()) {
    out->assign(static_cast<size_t>(dims), v.get<int64_t>());
    return true;
  }
  if (!v.is_array() || v.size() != static_cast<size_t>(dims)) return false;
  for (const auto& e : v) {
    if (!e.is_number_integer()) return false;
    out->push_back(e.get<int64_t>());
  }
  return true;
}

int64_t Volume(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

int NextPow2(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 20)) p <<= 1;
  return p;
}

// A constant argument of a functional convolution as the module's attribute
// would hold it: an int, a list of ints, or a padding mode; null otherwise.
json AttrOfArg(const json& a) {
  if (a.contains("value") && a["value"].is_number_integer()) return a["value"];
  if (a.contains("tuple") || a.contains("list")) {
    json out = json::array();
    for (const auto& e : a.contains("tuple") ? a["tuple"] : a["list"]) {
      if (!e.contains("value") || !e["value"].is_number_integer()) return nullptr;
      out.push_back(e["value"]);
    }
    return out;
  }
  const std::string r = a.value("repr", "");
  if (r == "'same'" || r == "\"same\"") return "same";
  if (r == "'valid'" || r == "\"valid\"") return "valid";
  return nullptr;
}

// A functional convolution (`F.conv2d(x, w, b, stride, padding, dilation,
// groups)`, `F.conv_transpose2d(x, w, b, stride, padding, output_padding,
// groups, dilation)`, or their torch.* names) as the module form's class,
// attributes and parameters, its weight and bias nodes (bias "" for none).
bool FunctionalConv(const Graph& g, const Node& n, std::string* cls, json* attrs, json* params, std::string* weight,
                    std::string* bias) {
  if (n.op != "call_function") return false;
  std::string fn = n.callable;
  for (const char* prefix : {"torch.nn.functional.", "torch."}) {
    if (fn.rfind(prefix, 0) == 0) {
      fn = fn.substr(std::string(prefix).size());
      break;
    }
  }
  if (fn.rfind("conv", 0) != 0) return false;
  const bool transposed = fn.rfind("conv_transpose", 0) == 0;
  const std::string mid = fn.substr(transposed ? 14 : 4);
  if (mid != "1d" && mid != "2d" && mid != "3d") return false;
  const std::vector<std::string> names =
      transposed ? std::vector<std::string>{"input", "weight", "bias", "stride", "padding", "output_padding", "groups",
                                            "dilation"}
                 : std::vector<std::string>{"input", "weight", "bias", "stride", "padding", "dilation", "groups"};
  if (n.args.size() > names.size()) return false;
  for (const auto& [k, v] : n.kwargs.items()) {
    if (std::find(names.begin(), names.end(), k) == names.end()) return false;
  }
  const json* w = n.Arg(1, "weight");
  const Node* wn = w && w->contains("node") ? g.Find((*w)["node"].get<std::string>()) : nullptr;
  if (!wn || !wn->is_tensor || wn->shape.size() < 3) return false;
  *weight = wn->name;
  bias->clear();
  const json* b = n.Arg(2, "bias");
  const Node* bn = nullptr;
  if (b && b->contains("node")) {
    bn = g.Find((*b)["node"].get<std::string>());
    if (!bn || !bn->is_tensor) return false;
    *bias = bn->name;
  } else if (b && b->value("repr", "None") != "None") {
    return false;
  }
  const json* x = n.Arg(0, "input");
  const Node* xn = x && x->contains("node") ? g.Find((*x)["node"].get<std::string>()) : nullptr;
  if (!xn || xn->shape.size() < 2) return false;
  json a = {{"stride", 1}, {"padding", 0}, {"dilation", 1}, {"groups", 1}, {"output_padding", 0}};
  for (size_t i = 3; i < names.size(); ++i) {
    if (const json* v = n.Arg(i, names[i])) {
      json attr = AttrOfArg(*v);
      if (attr.is_null()) return false;
      a[names[i]] = attr;
    }
  }
  if (!a["groups"].is_number_integer()) return false;
  const int64_t groups = a["groups"].get<int64_t>();
  a["in_channels"] = xn->shape[1];
  a["out_channels"] = transposed ? wn->shape[1] * groups : wn->shape[0];
  a["kernel_size"] = std::vector<int64_t>(wn->shape.begin() + 2, wn->shape.end());
  a["bias"] = bn != nullptr;
  json p = {{"weight", {{"shape", wn->shape}, {"dtype", wn->dtype}}}};
  if (bn) p["bias"] = {{"shape", bn->shape}, {"dtype", bn->dtype}};
  *cls = std::string(transposed ? "ConvTranspose" : "Conv") + mid;
  *attrs = std::move(a);
  *params = std::move(p);
  return true;
}

}  // namespace

bool ClassifyConv(const Graph& g, const Node& n, GemmOp* out) {
  if (!n.is_tensor || n.dtype != "torch.float32") return false;
  std::string cls, weight, bias;
  json fattrs, fparams;
  const bool functional = FunctionalConv(g, n, &cls, &fattrs, &fparams, &weight, &bias);
  if (!functional) {
    if (n.op != "call_module") return false;
    cls = n.ModuleClass();
  }
  const bool transposed = cls.rfind("ConvTranspose", 0) == 0;
  if (!(cls.rfind("Conv", 0) == 0 && cls.size() >= 6 && cls.substr(cls.size() - 1) == "d")) return false;
  const std::string mid = cls.substr(transposed ? 13 : 4, cls.size() - (transposed ? 13 : 4) - 1);
  if (mid != "1" && mid != "2" && mid != "3") return false;
  const int dims = mid[0] - '0';
  const json* xa = functional ? n.Arg(0, "input") : (n.args.size() == 1 && n.kwargs.empty() ? &n.args[0] : nullptr);
  if (!xa || !xa->is_object() || !xa->contains("node")) return false;
  const Node* x = g.Find((*xa)["node"].get<std::string>());
  if (!x || !x->is_tensor || x->dtype != "torch.float32" || x->shape.size() != static_cast<size_t>(dims) + 2) {
    return false;
  }
  const json& attrs = functional ? fattrs : n.module.contains("attrs") ? n.module["attrs"] : json::object();
  const json& params = functional ? fparams : n.module.contains("params") ? n.module["params"] : json::object();
  if (attrs.value("padding_mode", std::string("zeros")) != "zeros" || !params.contains("weight")) return false;
  ConvGeometry c;
  c.dims = dims;
  c.transposed = transposed;
  c.batch = x->shape[0];
  c.cin = AttrOr<int64_t>(attrs, "in_channels", -1);
  c.cout = AttrOr<int64_t>(attrs, "out_channels", -1);
  c.groups = AttrOr<int64_t>(attrs, "groups", 1);
  if (c.cin != x->shape[1] || c.cout <= 0 || c.groups <= 0 || c.cin % c.groups || c.cout % c.groups) return false;
  if (!PerDim(attrs, "kernel_size", dims, &c.kernel) || !PerDim(attrs, "stride", dims, &c.stride) ||
      !PerDim(attrs, "dilation", dims, &c.dilation)) {
    return false;
  }
  c.in.assign(x->shape.begin() + 2, x->shape.end());
  if (attrs.contains("padding") && attrs["padding"].is_string()) {
    const std::string mode = attrs["padding"].get<std::string>();
    c.padding.assign(static_cast<size_t>(dims), 0);
    if (mode == "same") {  // symmetric only: an odd total pads one side more
      for (int d = 0; d < dims; ++d) {
        const int64_t total = c.dilation[d] * (c.kernel[d] - 1);
        if (total % 2) return false;
        c.padding[d] = total / 2;
      }
    } else if (mode != "valid") {
      return false;
    }
  } else if (!PerDim(attrs, "padding", dims, &c.padding)) {
    return false;
  }
  std::vector<int64_t> outpad(static_cast<size_t>(dims), 0);
  if (transposed && !PerDim(attrs, "output_padding", dims, &outpad)) return false;
  for (int d = 0; d < dims; ++d) {
    if (c.kernel[d] <= 0 || c.stride[d] <= 0 || c.dilation[d] <= 0 || c.padding[d] < 0) return false;
    const int64_t span = c.dilation[d] * (c.kernel[d] - 1);
    const int64_t o = transposed ? (c.in[d] - 1) * c.stride[d] - 2 * c.padding[d] + span + outpad[d] + 1
                                 : (c.in[d] + 2 * c.padding[d] - span - 1) / c.stride[d] + 1;
    if (o <= 0) return false;
    c.out.push_back(o);
  }
  std::vector<int64_t> want = {c.batch, c.cout};
  want.insert(want.end(), c.out.begin(), c.out.end());
  if (n.shape != want) return false;
  std::vector<int64_t> wshape = transposed ? std::vector<int64_t>{c.cin, c.cout / c.groups}
                                           : std::vector<int64_t>{c.cout, c.cin / c.groups};
  wshape.insert(wshape.end(), c.kernel.begin(), c.kernel.end());
  const json& w = params["weight"];
  if (w.value("dtype", "") != "torch.float32" || w.value("shape", std::vector<int64_t>{}) != wshape) return false;
  GemmOp op;
  op.has_bias = AttrOr(attrs, "bias", false);
  if (op.has_bias && (!params.contains("bias") || params["bias"].value("dtype", "") != "torch.float32")) return false;
  op.linear = false;
  if (functional) {
    op.weight = weight;
    op.bias = bias;
    if (op.has_bias && params["bias"].value("shape", std::vector<int64_t>{}) != std::vector<int64_t>{c.cout}) {
      return false;
    }
  } else {
    op.module = n.target;
  }
  op.input = x->name;
  op.M = c.batch * Volume(c.out);
  op.N = c.cout / c.groups;
  op.K = c.cin / c.groups * Volume(c.kernel);
  op.in_shape = x->shape;
  op.out_shape = want;
  op.conv = std::move(c);
  if (op.M <= 0 || op.K <= 0) return false;
  *out = std::move(op);
  return true;
}

bool ConvTapMajor(const GemmOp& op) { return op.conv.cin / op.conv.groups >= 16; }

bool ConvDirect(const GemmOp& op) { return !op.conv.transposed && op.conv.cin == op.conv.groups; }

bool ConvScheduleValid(const GemmOp& op, const GemmSchedule& s) {
  return ConvDirect(op) ? s.Valid() && s.bm * s.bn <= 8192 : s.ValidForDot();
}

GemmSchedule DefaultConvSchedule(const GemmOp& op) {
  GemmSchedule s;
  if (ConvDirect(op)) {
    // H100, Level 1's depthwise 82-86 (bench/results/
    // h100_builtin_level1_convs.txt): 1024 rows of one channel per program,
    // 4 warps, 1.5x-3.6x eager at 3 steps (the implicit GEMM with BN 16 had
    // been 0.37x-0.65x). BK and the stages are not used (no tl.dot, no
    // pipelined operands).
    s.bm = 1024;
    s.bn = std::clamp(NextPow2(op.N), 1, 8);
    s.bk = 8;
    s.group_m = 1;
    s.warps = 4;
    s.stages = 1;
    return s;
  }
  // H100, bench/conv_tiles.py over Level-2 problems 1, 47 and 13, tap by tap
  // (bench/results/h100_conv_tiles.txt): the fastest tile was 256 x 64 with
  // 8 warps on all three (1.46x, 1.39x and 2.00x the cuDNN plan), and a BN of
  // 128 the slowest on problem 1 (0.92x): the split-TF32 operands of a wider
  // tile crowd the registers. Problems 7 and 21 (8 input channels, the
  // flattened loop): BK 16 at 1.08x and 1.31x, BK 32 at 0.80x and 0.91x.
  s.bn = std::clamp(NextPow2(op.N), 16, 64);
  // A K tile within one tap's channels when the kernel walks tap by tap.
  s.bk = ConvTapMajor(op) && op.conv.cin / op.conv.groups >= 32 ? 32 : 16;
  s.bm = op.M >= 65536 ? 256 : op.M >= 4096 ? 128 : 64;
  s.group_m = 8;
  s.warps = s.bm * s.bn >= 128 * 128 ? 8 : 4;  // the accumulator and the split operands in registers
  s.stages = 3;
  return s;
}

}  // namespace ax::builtin
