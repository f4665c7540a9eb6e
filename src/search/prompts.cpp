#include "search/prompts.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/install_paths.h"
#include "common/util.h"

namespace ax::search {

namespace {

// Renders tmpl[pos, end) into out; returns an error for unknown names or
// unbalanced sections.
Status RenderRange(const std::string& t, size_t pos, size_t end, const std::map<std::string, std::string>& v,
                   std::string* out) {
  while (pos < end) {
    size_t open = t.find("{{", pos);
    if (open == std::string::npos || open >= end) {
      out->append(t, pos, end - pos);
      return Status::Ok();
    }
    out->append(t, pos, open - pos);
    size_t close = t.find("}}", open);
    if (close == std::string::npos || close >= end) return Status::Error("unclosed {{ in template");
    std::string tag = t.substr(open + 2, close - open - 2);
    pos = close + 2;
    if (tag.empty()) return Status::Error("empty {{}} in template");
    char kind = tag[0];
    if (kind == '#' || kind == '^') {
      std::string name = tag.substr(1);
      std::string end_tag = "{{/" + name + "}}";
      // Section tags on lines of their own leave no line behind.
      const bool open_alone = open == 0 || t[open - 1] == '\n';
      if (open_alone && pos < end && t[pos] == '\n') ++pos;
      size_t sec_end = t.find(end_tag, pos);
      if (sec_end == std::string::npos || sec_end >= end) return Status::Error("section " + name + " never closed");
      auto it = v.find(name);
      if (it == v.end()) return Status::Error("template uses unknown value '" + name + "'");
      bool show = (kind == '#') == !it->second.empty();
      if (show) {
        Status s = RenderRange(t, pos, sec_end, v, out);
        if (!s.ok()) return s;
      }
      pos = sec_end + end_tag.size();
      const bool close_alone = sec_end == 0 || t[sec_end - 1] == '\n';
      if (close_alone && pos < end && t[pos] == '\n') ++pos;
      continue;
    }
    if (kind == '/') return Status::Error("unexpected {{" + tag + "}}");
    auto it = v.find(tag);
    if (it == v.end()) return Status::Error("template uses unknown value '" + tag + "'");
    out->append(it->second);
  }
  return Status::Ok();
}

// Empty in fp32. In fp16/bf16: what the task's tensors are, and the tolerance
// that applies to them.
std::string PrecisionRule(const PromptInputs& in) {
  if (in.half_precision.empty()) return "";
  const std::string t = in.half_precision == "bf16" ? "torch.bfloat16" : "torch.float16";
  char tol[32];
  std::snprintf(tol, sizeof tol, "%g", in.half_tol);
  return "\n- The task runs in " + in.half_precision + ": the model's parameters and its floating inputs are " + t +
         ", and the outputs must be " + t + " too (atol=rtol=" + tol +
         "). Load and store in that dtype; accumulate in float32.";
}

std::string Bullets(const std::vector<std::string>& rules) {
  std::string s;
  for (const auto& r : rules) s += "- " + r + "\n";
  return Trim(s);
}

std::string Kernels(const std::vector<ShownKernel>& ks, const char* label) {
  std::string s;
  for (size_t i = 0; i < ks.size(); ++i) {
    s += "### " + std::string(label) + " " + std::to_string(i + 1) + ": " + ks[i].verdict + "\n\n";
    if (!ks[i].profile.empty()) s += "Profile: " + ks[i].profile + "\n\n";
    if (!ks[i].note.empty()) s += "Made from this guidance or feedback:\n" + ks[i].note + "\n\n";
    s += "```python\n" + Trim(ks[i].source) + "\n```\n\n";
  }
  return Trim(s);
}

const char* kFiles[] = {"system.txt", "proposer.txt", "reviser.txt", "tuner.txt",
                        "example_reference.py", "example_triton.py", "example_cuda.py"};

}  // namespace

Status RenderTemplate(const std::string& tmpl, const std::map<std::string, std::string>& values, std::string* out) {
  out->clear();
  return RenderRange(tmpl, 0, tmpl.size(), values, out);
}

std::string Prompts::DefaultDir() {
  return PromptsDir();
}

Status Prompts::Load(const std::string& dir_in, Prompts* out) {
  std::string dir = dir_in.empty() ? DefaultDir() : dir_in;
  for (const char* f : kFiles) {
    auto text = ReadFile(dir + "/" + f);
    if (!text) return Status::Error("prompt template missing: " + dir + "/" + f);
    out->files_[f] = *text;
  }
  return Status::Ok();
}

Status Prompts::Common(const PromptInputs& in, std::map<std::string, std::string>* v, std::string* system) const {
  bool cuda = in.backend == "cuda";
  char tol[32];
  std::snprintf(tol, sizeof tol, "%g", in.fp32_tol);
  *v = {{"task_source", Trim(in.task_source)},
        {"backend_name", cuda ? "CUDA" : "Triton"},
        {"backend_rule", cuda ? "a `__global__` kernel built with torch.utils.cpp_extension.load_inline"
                              : "a `@triton.jit` kernel launched from forward"},
        {"tolerance", in.tolerance},
        {"fp32_tol", tol},
        {"precision_rule", PrecisionRule(in)},
        {"hardware", in.hardware},
        {"rules", Bullets(in.rules)},
        {"pool", Kernels(in.pool, "Kernel")},
        {"path", Kernels(in.path, "Attempt")},
        {"parent_source", Trim(in.parent.source)},
        {"parent_verdict", in.parent.verdict + (in.parent.profile.empty() ? "" : "\nProfile: " + in.parent.profile)},
        {"guidance", Trim(in.guidance)},
        {"feedback", Trim(in.feedback)},
        {"example_reference", Trim(files_.at("example_reference.py"))},
        {"example_answer", Trim(files_.at(cuda ? "example_cuda.py" : "example_triton.py"))}};
  return RenderTemplate(files_.at("system.txt"), *v, system);
}

Status Prompts::Proposer(const PromptInputs& in, RenderedPrompt* out) const {
  std::map<std::string, std::string> v;
  Status s = Common(in, &v, &out->system);
  if (!s.ok()) return s;
  return RenderTemplate(files_.at("proposer.txt"), v, &out->user);
}

Status Prompts::Reviser(const PromptInputs& in, RenderedPrompt* out) const {
  std::map<std::string, std::string> v;
  Status s = Common(in, &v, &out->system);
  if (!s.ok()) return s;
  return RenderTemplate(files_.at("reviser.txt"), v, &out->user);
}

Status Prompts::Tuner(const PromptInputs& in, RenderedPrompt* out) const {
  std::map<std::string, std::string> v;
  Status s = Common(in, &v, &out->system);
  if (!s.ok()) return s;
  return RenderTemplate(files_.at("tuner.txt"), v, &out->user);
}

}  // namespace ax::search
