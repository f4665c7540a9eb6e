#include "search/skill_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/util.h"

namespace ax::search {

Status ParseRuleLines(const std::string& text, std::vector<ScoredRule>* out) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    size_t sep = t.rfind("||");
    if (sep == std::string::npos) return Status::Error("line " + std::to_string(n) + ": expected 'rule||score'");
    std::string score = Trim(t.substr(sep + 2));
    char* end = nullptr;
    double v = std::strtod(score.c_str(), &end);
    bool plain = !score.empty() && score.find_first_not_of("0123456789+-.eE") == std::string::npos;
    if (!plain || (end && *end) || !std::isfinite(v)) {
      return Status::Error("line " + std::to_string(n) + ": score '" + score + "' is not a number");
    }
    out->push_back({Trim(t.substr(0, sep)), v});
  }
  return Status::Ok();
}

Status LoadRulesFile(const std::string& path, std::vector<ScoredRule>* out) {
  auto text = ReadFile(path);
  if (!text) return Status::Error("cannot read memory file: " + path);
  Status s = ParseRuleLines(*text, out);
  if (!s.ok()) return Status::Error(path + ": " + s.message());
  return Status::Ok();
}

std::vector<std::string> SelectRules(const std::vector<ScoredRule>& rules, double threshold, size_t max_chars) {
  std::vector<ScoredRule> keep;
  for (const auto& r : rules) {
    if (r.score >= threshold && !r.text.empty()) keep.push_back(r);
  }
  std::stable_sort(keep.begin(), keep.end(), [](const ScoredRule& a, const ScoredRule& b) { return a.score > b.score; });
  std::vector<std::string> out;
  size_t used = 0;
  for (const auto& r : keep) {
    if (used + r.text.size() + 3 > max_chars) continue;  // too long here; shorter ones may still fit
    used += r.text.size() + 3;
    out.push_back(r.text);
  }
  return out;
}

}  // namespace ax::search
