// Skill-memory rules for prompts: reads the reference implementation's
// `rule||score` text format and picks the rules to inject (score at or above
// a threshold, highest first, within a size budget). The full memory (JSON
// form, deduplication, updates) belongs to `adaexplore memory`.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace ax::search {

struct ScoredRule {
  std::string text;
  double score = 0;
};

// Parses `rule||score` lines; blank lines and lines starting with '#' are
// skipped; a line without a valid score is an error naming its number.
Status ParseRuleLines(const std::string& text, std::vector<ScoredRule>* out);
Status LoadRulesFile(const std::string& path, std::vector<ScoredRule>* out);

// Rules with score >= threshold, highest score first (ties keep file order),
// as many as fit in max_chars.
std::vector<std::string> SelectRules(const std::vector<ScoredRule>& rules, double threshold = 3,
                                     size_t max_chars = 4000);

}  // namespace ax::search
