#include "builtin/ew_ops.h"

#include "builtin/reduce.h"

namespace ax::builtin {

namespace {

using Args = std::vector<std::string>;

std::string P(const EwOp& op, const char* k) { return PyFloat(op.params.at(k)); }

std::string Tanh(const std::string& x) { return "(2.0 / (1.0 + tl.exp(-2.0 * (" + x + "))) - 1.0)"; }

std::string AddSub(const EwOp& op, const Args& a, const char* sign) {
  const std::string y = op.params.count("alpha") ? "(" + P(op, "alpha") + " * " + a[1] + ")" : a[1];
  return a[0] + sign + y;
}

// PyTorch's pointwise KL terms: xlogy(t, t) - t * x, or exp(t) * (t - x) with log_target.
std::string KlDiv(const EwOp& op, const Args& a) {
  const std::string x0 = "(" + a[0] + ")", t = "(" + a[1] + ")";
  if (op.variant == "log_target") return "tl.exp(" + t + ") * (" + t + " - " + x0 + ")";
  if (op.variant == "log_ratio") {
    // x0 is p (the input was log(p)). As PyTorch's xlogy(t, t) - t * log(p):
    // 0 where t == 0 unless log(p) is infinite or NaN (then 0 * log(p) is
    // NaN), NaN where t < 0 (log t is).
    return "tl.where(" + t + " == 0.0, tl.where((" + x0 + " > 0.0) & (" + x0 + " < float('inf')), 0.0, float('nan')), " +
           "tl.where(" + t + " < 0.0, float('nan'), " + t + " * tl.log(" + t + " / " + x0 + ")))";
  }
  return "tl.where(" + t + " == 0.0, 0.0, " + t + " * tl.log(" + t + ")) - " + t + " * " + x0;
}

// PyTorch's formulas, on z = |x - y|.
std::string SmoothL1(const EwOp& op, const Args& a) {
  const std::string z = "tl.abs(" + a[0] + " - " + a[1] + ")", b = P(op, "beta");
  return "tl.where(" + z + " < " + b + ", 0.5 * " + z + " * " + z + " / " + b + ", " + z + " - 0.5 * " + b + ")";
}
std::string Huber(const EwOp& op, const Args& a) {
  const std::string z = "tl.abs(" + a[0] + " - " + a[1] + ")", d = P(op, "delta");
  return "tl.where(" + z + " < " + d + ", 0.5 * " + z + " * " + z + ", " + d + " * (" + z + " - 0.5 * " + d + "))";
}

std::string Pow(const EwOp& op, const Args& a) {
  const double e = op.params.at("exponent");
  const std::string& x = a[0];
  if (e == 2.0) return x + " * " + x;
  if (e == 3.0) return x + " * " + x + " * " + x;
  if (e == 0.5) return "tl.sqrt(" + x + ")";
  if (e == 1.0) return x;
  return "1.0 / " + x;  // -1, the only other exponent classified
}

std::string Gelu(const EwOp& op, const Args& a) {
  const std::string& x = a[0];
  if (op.variant == "tanh") {
    return "0.5 * " + x + " * (1.0 + " + Tanh("0.7978845608028654 * (" + x + " + 0.044715 * " + x + " * " + x + " * " + x + ")") +
           ")";
  }
  return "0.5 * " + x + " * (1.0 + tl.math.erf(" + x + " * 0.7071067811865476))";
}

std::string Softplus(const EwOp& op, const Args& a) {
  const std::string& x = a[0];
  const std::string b = P(op, "beta");
  return "tl.where(" + x + " * " + b + " > " + P(op, "threshold") + ", " + x + ", tl.log(1.0 + tl.exp(" + x + " * " + b +
         ")) / " + b + ")";
}

std::string Clamp(const EwOp& op, const Args& a) {
  std::string e = a[0];
  if (op.params.count("min")) e = "tl.maximum(" + e + ", " + P(op, "min") + kNanArg;
  if (op.params.count("max")) e = "tl.minimum(" + e + ", " + P(op, "max") + kNanArg;
  return e;
}

const std::map<std::string, EwOpDef>& Registry() {
  static const std::map<std::string, EwOpDef> r = {
      {"add", {2, [](const EwOp& op, const Args& a) { return AddSub(op, a, " + "); }}},
      {"sub", {2, [](const EwOp& op, const Args& a) { return AddSub(op, a, " - "); }}},
      {"mul", {2, [](const EwOp&, const Args& a) { return a[0] + " * " + a[1]; }}},
      {"div", {2, [](const EwOp&, const Args& a) { return a[0] + " / " + a[1]; }}},
      {"maximum", {2, [](const EwOp&, const Args& a) { return "tl.maximum(" + a[0] + ", " + a[1] + kNanArg; }}},
      {"minimum", {2, [](const EwOp&, const Args& a) { return "tl.minimum(" + a[0] + ", " + a[1] + kNanArg; }}},
      {"mse_loss",
       {2, [](const EwOp&, const Args& a) { return "(" + a[0] + " - " + a[1] + ") * (" + a[0] + " - " + a[1] + ")"; }}},
      {"l1_loss", {2, [](const EwOp&, const Args& a) { return "tl.abs(" + a[0] + " - " + a[1] + ")"; }}},
      {"kl_div", {2, KlDiv}},
      {"smooth_l1_loss", {2, SmoothL1}},
      {"huber_loss", {2, Huber}},
      {"pow", {1, Pow}},
      {"neg", {1, [](const EwOp&, const Args& a) { return "-" + a[0]; }}},
      {"identity", {1, [](const EwOp&, const Args& a) { return a[0]; }}},
      // NaN stays NaN, as in PyTorch.
      {"relu", {1, [](const EwOp&, const Args& a) { return "tl.where(" + a[0] + " <= 0.0, 0.0, " + a[0] + ")"; }}},
      {"sigmoid", {1, [](const EwOp&, const Args& a) { return "1.0 / (1.0 + tl.exp(-" + a[0] + "))"; }}},
      {"tanh", {1, [](const EwOp&, const Args& a) { return Tanh(a[0]); }}},
      {"exp", {1, [](const EwOp&, const Args& a) { return "tl.exp(" + a[0] + ")"; }}},
      {"log", {1, [](const EwOp&, const Args& a) { return "tl.log(" + a[0] + ")"; }}},
      {"sqrt", {1, [](const EwOp&, const Args& a) { return "tl.sqrt(" + a[0] + ")"; }}},
      {"rsqrt", {1, [](const EwOp&, const Args& a) { return "1.0 / tl.sqrt(" + a[0] + ")"; }}},
      {"abs", {1, [](const EwOp&, const Args& a) { return "tl.abs(" + a[0] + ")"; }}},
      {"erf", {1, [](const EwOp&, const Args& a) { return "tl.math.erf(" + a[0] + ")"; }}},
      {"square", {1, [](const EwOp&, const Args& a) { return a[0] + " * " + a[0]; }}},
      {"reciprocal", {1, [](const EwOp&, const Args& a) { return "1.0 / " + a[0]; }}},
      {"gelu", {1, Gelu}},
      {"silu", {1, [](const EwOp&, const Args& a) { return a[0] + " / (1.0 + tl.exp(-" + a[0] + "))"; }}},
      {"hardswish",
       {1,
        [](const EwOp&, const Args& a) {
          return a[0] + " * tl.minimum(tl.maximum(" + a[0] + " + 3.0, 0.0" + kNanArg + ", 6.0" + kNanArg + " / 6.0";
        }}},
      {"hardsigmoid",
       {1,
        [](const EwOp&, const Args& a) {
          return "tl.minimum(tl.maximum(" + a[0] + " + 3.0, 0.0" + kNanArg + ", 6.0" + kNanArg + " / 6.0";
        }}},
      {"leaky_relu",
       {1,
        [](const EwOp& op, const Args& a) {
          return "tl.where(" + a[0] + " > 0.0, " + a[0] + ", " + a[0] + " * " + P(op, "negative_slope") + ")";
        }}},
      {"elu",
       {1,
        [](const EwOp& op, const Args& a) {
          return "tl.where(" + a[0] + " > 0.0, " + a[0] + ", " + P(op, "alpha") + " * (tl.exp(" + a[0] + ") - 1.0))";
        }}},
      // PyTorch's constants (torch/nn/functional.py), as float32 would round them.
      {"selu",
       {1,
        [](const EwOp&, const Args& a) {
          return "1.0507009873554805 * tl.where(" + a[0] + " > 0.0, " + a[0] + ", 1.6732632423543772 * (tl.exp(" + a[0] +
                 ") - 1.0))";
        }}},
      {"softplus", {1, Softplus}},
      {"mish",
       {1,
        [](const EwOp&, const Args& a) {
          return a[0] + " * " + Tanh("tl.where(" + a[0] + " > 20.0, " + a[0] + ", tl.log(1.0 + tl.exp(" + a[0] + ")))");
        }}},
      {"clamp", {1, Clamp}},
  };
  return r;
}

}  // namespace

const EwOpDef* FindEwOp(const std::string& fn) {
  auto it = Registry().find(fn);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> EwOpNames() {
  std::vector<std::string> out;
  for (const auto& [k, v] : Registry()) out.push_back(k);
  return out;
}

const std::map<std::string, std::string>& EwModuleOps() {
  static const std::map<std::string, std::string> m = {
      {"ReLU", "relu"},          {"GELU", "gelu"},        {"Sigmoid", "sigmoid"},       {"Tanh", "tanh"},
      {"SiLU", "silu"},          {"Hardswish", "hardswish"}, {"Hardsigmoid", "hardsigmoid"}, {"LeakyReLU", "leaky_relu"},
      {"ELU", "elu"},            {"SELU", "selu"},        {"Softplus", "softplus"},     {"Mish", "mish"},
      {"Hardtanh", "clamp"},     {"ReLU6", "clamp"},      {"Identity", "identity"},     {"Dropout", "identity"}};
  return m;
}

Status RenderEw(const EwOp& op, const std::vector<std::string>& a, std::string* out) {
  const EwOpDef* def = FindEwOp(op.fn);
  if (!def) return Status::Error("no template for " + op.fn);
  if (a.size() < static_cast<size_t>(def->operands)) return Status::Error("too few operands for " + op.fn);
  *out = def->render(op, a);
  return Status::Ok();
}

}  // namespace ax::builtin
