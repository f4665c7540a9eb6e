#include "adapt/task_signature.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace ax::adapt {

namespace {

bool IdChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The source with comments removed and every string literal replaced by ""
// (a string standing alone on its line, a docstring, by nothing). Newlines
// and indentation are kept.
std::string StripCommentsAndStrings(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  auto line_is_blank_so_far = [&] {
    size_t j = out.rfind('\n');
    for (size_t k = (j == std::string::npos ? 0 : j + 1); k < out.size(); ++k) {
      if (!std::isspace(static_cast<unsigned char>(out[k]))) return false;
    }
    return true;
  };
  while (i < n) {
    char c = s[i];
    if (c == '#') {
      while (i < n && s[i] != '\n') ++i;
      continue;
    }
    // String prefixes (r, b, f, u and pairs) belong to the literal.
    size_t start = i;
    size_t q = i;
    while (q < n && q - i < 2 && std::strchr("rRbBfFuU", s[q]) && s[q] != '\0') ++q;
    bool prefixed = q > i && q < n && (s[q] == '"' || s[q] == '\'') && (i == 0 || !IdChar(s[i - 1]));
    if (c == '"' || c == '\'' || prefixed) {
      size_t p = prefixed ? q : i;
      char quote = s[p];
      bool triple = p + 2 < n && s[p + 1] == quote && s[p + 2] == quote;
      bool standalone = line_is_blank_so_far();
      p += triple ? 3 : 1;
      while (p < n) {
        if (s[p] == '\\') {
          p += 2;
          continue;
        }
        if (triple) {
          if (p + 2 < n && s[p] == quote && s[p + 1] == quote && s[p + 2] == quote) {
            p += 3;
            break;
          }
        } else if (s[p] == quote || s[p] == '\n') {
          ++p;
          break;
        }
        ++p;
      }
      if (!standalone) out += "\"\"";
      i = p;
      (void)start;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) v.push_back(l);
  return v;
}

int Indent(const std::string& l) {
  int n = 0;
  for (char c : l) {
    if (c == ' ') {
      ++n;
    } else if (c == '\t') {
      n += 8;
    } else {
      break;
    }
  }
  return n;
}

bool Blank(const std::string& l) {
  for (char c : l) {
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The body of the first `def NAME(` (any indentation), as lines.
std::vector<std::string> FunctionBody(const std::vector<std::string>& lines, const std::string& name) {
  std::vector<std::string> body;
  const std::regex def("^\\s*def\\s+" + name + "\\s*\\(");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], def)) continue;
    int ind = Indent(lines[i]);
    for (size_t j = i + 1; j < lines.size(); ++j) {
      if (Blank(lines[j])) continue;
      if (Indent(lines[j]) <= ind) break;
      body.push_back(lines[j]);
    }
    break;
  }
  return body;
}

// The text between the parenthesis at `open` and its match.
std::string Args(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) return s.substr(open + 1, i - open - 1);
  }
  return s.substr(open + 1);
}

// Top-level comma-separated arguments.
std::vector<std::string> SplitArgs(const std::string& a) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : a) {
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  bool blank = true;
  for (char c : cur) blank = blank && std::isspace(static_cast<unsigned char>(c));
  if (!blank) out.push_back(cur);
  return out;
}

std::string Squash(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) o += c;
  }
  return o;
}

const std::map<std::string, std::string>& FunctionKinds() {
  static const std::map<std::string, std::string> m = {
      {"relu", "ReLU"}, {"relu_", "ReLU"}, {"relu6", "ReLU6"}, {"gelu", "GELU"}, {"silu", "SiLU"},
      {"tanh", "Tanh"}, {"sigmoid", "Sigmoid"}, {"leaky_relu", "LeakyReLU"}, {"hardswish", "Hardswish"},
      {"hardtanh", "Clamp"}, {"mish", "Mish"}, {"softplus", "Softplus"}, {"elu", "ELU"}, {"selu", "SELU"},
      {"softmax", "Softmax"}, {"log_softmax", "LogSoftmax"}, {"clamp", "Clamp"}, {"clip", "Clamp"},
      {"clamp_min", "Clamp"}, {"clamp_max", "Clamp"}, {"mean", "Mean"}, {"sum", "Sum"}, {"max", "Max"},
      {"amax", "Amax"}, {"min", "Min"}, {"amin", "Amin"}, {"logsumexp", "LogSumExp"}, {"flatten", "Flatten"},
      {"view", "Reshape"}, {"reshape", "Reshape"}, {"matmul", "Matmul"}, {"mm", "Matmul"}, {"bmm", "Matmul"},
      {"linear", "Linear"}, {"conv1d", "Conv1d"}, {"conv2d", "Conv2d"}, {"conv3d", "Conv3d"},
      {"conv_transpose2d", "ConvTranspose2d"}, {"conv_transpose3d", "ConvTranspose3d"},
      {"layer_norm", "LayerNorm"}, {"group_norm", "GroupNorm"}, {"batch_norm", "BatchNorm"},
      {"instance_norm", "InstanceNorm"}, {"max_pool2d", "MaxPool2d"}, {"avg_pool2d", "AvgPool2d"},
      {"adaptive_avg_pool2d", "AdaptiveAvgPool2d"}, {"add", "Add"}, {"sub", "Subtract"}, {"mul", "Multiply"},
      {"div", "Divide"}, {"exp", "Exp"}, {"log", "Log"}, {"abs", "Abs"}, {"sqrt", "Sqrt"}, {"pow", "Pow"},
  };
  return m;
}

// Calls that say nothing about the computation.
const std::set<std::string>& Ignored() {
  static const std::set<std::string> s = {"size", "dim", "numel", "item", "contiguous", "to", "float", "double",
                                          "half", "type", "detach", "clone", "cpu", "cuda", "super", "__init__",
                                          "dropout", "Dropout", "Identity"};
  return s;
}

const std::map<std::string, std::string>& ModuleKinds() {
  static const std::map<std::string, std::string> m = {{"Hardtanh", "Clamp"}, {"Softmax2d", "Softmax"}};
  return m;
}

bool Annotated(const std::string& kind) {
  static const std::set<std::string> s = {"Mean", "Sum", "Max", "Amax", "Min", "Amin", "LogSumExp",
                                          "Softmax", "LogSoftmax"};
  return s.count(kind) > 0;
}

// "(1)" or "(1,k)" from the call's arguments; positional dim is the second
// argument of a function (torch.mean(x, 1)), the first of a method (x.mean(1)).
std::string DimNote(const std::string& args, bool method) {
  static const std::regex dim_kw("(?:^|[,\\s(])dim\\s*=\\s*(\\([-0-9,\\s]*\\)|\\[[-0-9,\\s]*\\]|-?[0-9]+)");
  static const std::regex keep_kw("keepdim\\s*=\\s*True");
  std::string dim;
  std::smatch m;
  if (std::regex_search(args, m, dim_kw)) {
    dim = Squash(m[1].str());
  } else {
    auto parts = SplitArgs(args);
    size_t idx = method ? 0 : 1;
    if (parts.size() > idx) {
      std::string p = Squash(parts[idx]);
      if (std::regex_match(p, std::regex("-?[0-9]+|\\([-0-9,]*\\)"))) dim = p;
    }
  }
  bool keep = std::regex_search(args, keep_kw);
  if (dim.empty() && !keep) return "";
  return "(" + dim + (keep ? ",k" : "") + ")";
}

}  // namespace

std::string NormaliseSource(const std::string& source) {
  std::string clean = StripCommentsAndStrings(source);
  std::string out;
  size_t i = 0;
  const size_t n = clean.size();
  bool line_has_token = false;
  auto emit = [&](const std::string& tok) {
    if (line_has_token) out += ' ';
    out += tok;
    line_has_token = true;
  };
  while (i < n) {
    char c = clean[i];
    if (c == '\n') {
      if (line_has_token) out += '\n';
      line_has_token = false;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(clean[i + 1])))) {
      while (i < n && (IdChar(clean[i]) || clean[i] == '.' ||
                       ((clean[i] == '+' || clean[i] == '-') && (clean[i - 1] == 'e' || clean[i - 1] == 'E')))) {
        ++i;
      }
      emit("N");
    } else if (IdChar(c)) {
      size_t j = i;
      while (j < n && IdChar(clean[j])) ++j;
      emit(clean.substr(i, j - i));
      i = j;
    } else if (c == '"' && i + 1 < n && clean[i + 1] == '"') {
      emit("\"\"");  // a string literal, as StripCommentsAndStrings left it
      i += 2;
    } else {
      emit(std::string(1, c));
      ++i;
    }
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<std::string> ForwardOps(const std::string& source) {
  std::vector<std::string> lines = Lines(StripCommentsAndStrings(source));
  // self.NAME = nn.KIND(...) in __init__ (or anywhere in the class).
  std::map<std::string, std::string> modules;
  static const std::regex assign("self\\.(\\w+)\\s*=\\s*(?:torch\\.)?nn\\.(\\w+)\\s*\\(");
  for (const auto& l : lines) {
    for (std::sregex_iterator it(l.begin(), l.end(), assign), end; it != end; ++it) {
      std::string kind = (*it)[2].str();
      if (auto m = ModuleKinds().find(kind); m != ModuleKinds().end()) kind = m->second;
      modules[(*it)[1].str()] = kind;
    }
  }
  std::vector<std::string> ops;
  static const std::regex call("(self\\.(\\w+)|(?:torch\\.nn\\.functional|F|torch|nn\\.functional)\\.(\\w+)|\\.(\\w+))\\s*\\(");
  for (const auto& raw : FunctionBody(lines, "forward")) {
    std::string l = raw;
    // Events in textual order: calls and binary operators.
    std::vector<std::pair<size_t, std::string>> events;
    for (std::sregex_iterator it(l.begin(), l.end(), call), end; it != end; ++it) {
      const auto& m = *it;
      size_t open = static_cast<size_t>(m.position(0) + m.length(0) - 1);
      std::string kind;
      bool method = false;
      if (m[2].matched) {
        auto mod = modules.find(m[2].str());
        if (mod == modules.end() || mod->second == "Parameter") continue;
        kind = mod->second;
      } else {
        std::string fn = m[3].matched ? m[3].str() : m[4].str();
        method = m[4].matched;
        if (Ignored().count(fn)) continue;
        auto f = FunctionKinds().find(fn);
        if (f != FunctionKinds().end()) {
          kind = f->second;
        } else {
          kind = fn;
          kind[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0])));
        }
      }
      if (Ignored().count(kind)) continue;
      if (Annotated(kind)) kind += DimNote(Args(l, open), method);
      events.push_back({static_cast<size_t>(m.position(0)), kind});
    }
    for (size_t i = 0; i < l.size(); ++i) {
      char c = l[i];
      if (!std::strchr("+-*/@", c)) continue;
      // Binary only: after an operand, not part of ** or // or an exponent.
      size_t j = i;
      while (j > 0 && l[j - 1] == ' ') --j;
      if (j == 0) continue;
      char prev = l[j - 1];
      if (!(IdChar(prev) || prev == ')' || prev == ']')) continue;
      if ((c == '+' || c == '-') && (prev == 'e' || prev == 'E') && j >= 2 && std::isdigit(static_cast<unsigned char>(l[j - 2]))) continue;
      std::string kind;
      bool doubled = i + 1 < l.size() && l[i + 1] == c && (c == '*' || c == '/');
      switch (c) {
        case '+': kind = "Add"; break;
        case '-': kind = "Subtract"; break;
        case '*': kind = doubled ? "Pow" : "Multiply"; break;
        case '/': kind = doubled ? "FloorDivide" : "Divide"; break;
        default: kind = "Matmul"; break;
      }
      events.push_back({i, kind});
      if (doubled) ++i;
    }
    std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& e : events) ops.push_back(e.second);
  }
  return ops;
}

std::vector<int> InputRanks(const std::string& source) {
  std::vector<std::string> lines = Lines(StripCommentsAndStrings(source));
  std::vector<int> ranks;
  static const std::regex maker("torch\\.(rand|randn|randint|ones|zeros|empty|full)\\s*\\(");
  for (const auto& l : FunctionBody(lines, "get_inputs")) {
    for (std::sregex_iterator it(l.begin(), l.end(), maker), end; it != end; ++it) {
      size_t open = static_cast<size_t>(it->position(0) + it->length(0) - 1);
      std::vector<std::string> parts = SplitArgs(Args(l, open));
      std::string fn = (*it)[1].str();
      if (fn == "randint" && parts.size() >= 2) {
        // randint(low, high, size) or randint(high, size)
        std::string size = Squash(parts.size() >= 3 ? parts[2] : parts[1]);
        parts = SplitArgs(size.size() >= 2 ? size.substr(1, size.size() - 2) : size);
      } else if (fn == "full" && !parts.empty()) {
        std::string size = Squash(parts[0]);
        parts = SplitArgs(size.size() >= 2 ? size.substr(1, size.size() - 2) : size);
      } else {
        int positional = 0;
        for (const auto& p : parts) {
          if (p.find('=') == std::string::npos) ++positional;
        }
        parts.resize(static_cast<size_t>(positional));
        if (parts.size() == 1) {
          std::string p = Squash(parts[0]);
          if (!p.empty() && (p[0] == '(' || p[0] == '[')) parts = SplitArgs(p.substr(1, p.size() - 2));
        }
      }
      ranks.push_back(static_cast<int>(parts.size()));
    }
  }
  return ranks;
}

std::string TaskSignature(const std::string& source, const std::string& outputs_json) {
  std::string sig = "in[";
  auto ranks = InputRanks(source);
  for (size_t i = 0; i < ranks.size(); ++i) sig += (i ? "," : "") + std::to_string(ranks[i]);
  sig += "] ";
  auto ops = ForwardOps(source);
  for (size_t i = 0; i < ops.size(); ++i) sig += (i ? ">" : "") + ops[i];
  if (!outputs_json.empty()) {
    try {
      auto j = nlohmann::json::parse(outputs_json);
      sig += " out[";
      bool first = true;
      for (const auto& o : j) {
        sig += (first ? "" : ",") + std::to_string(o.value("shape", nlohmann::json::array()).size());
        first = false;
      }
      sig += "]";
    } catch (const std::exception&) {
    }
  }
  return sig;
}

long long OutputBytes(const std::string& outputs_json) {
  static const std::map<std::string, int> size = {
      {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"float64", 8}, {"int64", 8}, {"int32", 4},
      {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"bool", 1},    {"complex64", 8}, {"complex128", 16}};
  try {
    auto j = nlohmann::json::parse(outputs_json);
    long long total = 0;
    for (const auto& o : j) {
      long long n = 1;
      for (const auto& d : o.at("shape")) n *= d.get<long long>();
      auto it = size.find(o.value("dtype", "float32"));
      total += n * (it == size.end() ? 8 : it->second);
    }
    return total;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace ax::adapt
