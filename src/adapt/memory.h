// Memory: the cross-task skill memory. Short validity rules ("You cannot ...")
// learnt from failed candidates, each with a score (how often the mistake was
// made), a few examples (task, error excerpt) and when it was first and last
// seen. Prompts carry the best rules (Select).
//
// Files: the reference implementation's text format, one `rule||score` per
// line (a path ending in .txt), or a JSON form with every field (.json).
// Saving is atomic (a temporary file renamed over the old one).
//
// Deduplication scales with the memory: an added rule is first matched
// exactly, then after normalisation (case, whitespace, punctuation, quotes),
// then a lexical shortlist (IDF-weighted Jaccard over word unigrams and
// bigrams, found through an inverted index, at most `shortlist_size` rules)
// goes to the LLM, which picks the rule that forbids the same action, if any.
// The LLM never sees the whole memory. A duplicate adds 1 to the score of the
// rule it matches; a new rule starts at 1.
//
// Thread safety: every method may be called from many threads at once. No
// lock is held across an LLM call: Add snapshots the shortlist under the
// lock, asks the LLM without it, then re-checks under the lock, asking again
// about rules that were added meanwhile.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "llm/client.h"

namespace ax::adapt {

struct RuleExample {
  std::string task;
  std::string error;  // an excerpt of the judge's error text
  int64_t time = 0;   // unix seconds
};

struct Rule {
  std::string text;
  double score = 0;
  std::vector<RuleExample> examples;  // oldest first, at most MemoryOptions::max_examples
  int64_t first_seen = 0, last_seen = 0;  // unix seconds; 0 = unknown (imported from text)
};

struct MemoryOptions {
  size_t shortlist_size = 8;      // rules shown to the LLM per round, at most
  double min_similarity = 0.2;    // weighted Jaccard a rule needs to be shortlisted
  size_t max_candidates = 2000;   // rules scored per lookup, at most (rarest words first)
  size_t max_examples = 3;        // examples kept per rule (the newest)
  size_t max_error_chars = 300;   // error excerpt kept per example
  size_t max_rule_chars = 600;    // longer rules are cut
  // LLM rounds per add, at most. A round only follows when similar rules were
  // added by other tasks during the previous one; a cap that is reached lets
  // the rule in as new (a possible duplicate, never a lost update).
  int llm_rounds = 16;
  int llm_max_tokens = 0;         // 0: the client's default (reasoning models need room)
  std::function<int64_t()> now;   // unix seconds; default: the system clock
};

enum class Match { kNew, kExact, kNormalized, kLlm };
const char* MatchName(Match m);

struct AddResult {
  Status status;                 // an error only for an empty rule
  Match match = Match::kNew;
  std::string rule;              // the stored rule the add counted toward
  double score = 0;              // its score after the add
  size_t shown_to_llm = 0;       // shortlisted rules shown to the LLM, all rounds
  int llm_calls = 0;
  std::string llm_error;         // the LLM failed: the rule was kept as new (unless matched otherwise)
};

class Memory {
 public:
  explicit Memory(MemoryOptions opts = {});
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // ---- files and formats ----
  // "text" for .txt, "json" for .json, empty otherwise.
  static std::string FormatOf(const std::string& path);
  // Replaces the contents with the file's (format by extension; another
  // extension is sniffed: '{' starts JSON). A missing file with missing_ok
  // leaves the memory empty. Rules equal after normalisation are merged.
  Status Load(const std::string& path, bool missing_ok = false);
  // Writes the file in the format its extension names, atomically; on failure
  // the memory is unchanged and the old file (if any) stays whole.
  Status Save(const std::string& path) const;
  // Save, unless nothing changed since the last successful save to `path`.
  Status SaveIfChanged(const std::string& path) const;

  // Replace the contents (rules equal after normalisation are merged).
  Status FromText(const std::string& text);
  Status FromJson(const std::string& text);
  std::string ToText() const;
  nlohmann::json ToJson() const;

  // Adds other's rules: a rule equal (exactly or normalised) to one here adds
  // its score to it; the others are appended. No LLM is asked.
  void Merge(const Memory& other);

  // ---- updates ----
  // The LLM for the last deduplication stage (nullptr: none, so the stages
  // end with the normalised match). Loads prompts/rule_dedup.txt from
  // prompts_dir (empty: the default prompts folder). Call before sharing.
  Status SetLlm(llm::LlmClient* client, const std::string& prompts_dir = "");
  // Records one occurrence of a mistake.
  AddResult Add(const std::string& rule, const RuleExample& example = {});
  // Removes rules scoring below min_score, then keeps the max_rules best
  // (0: no limit; ties keep the older). Returns how many were removed.
  size_t Prune(double min_score, size_t max_rules = 0);
  void Clear();

  // ---- queries (each a consistent snapshot) ----
  size_t size() const;
  double total_score() const;
  uint64_t version() const;          // grows with every change
  std::vector<Rule> Rules() const;   // in the order they were first seen
  std::optional<Rule> Find(const std::string& text) const;  // exact or normalised match
  // Rules for prompts: score >= threshold, highest first, within max_chars
  // (search::SelectRules).
  std::vector<std::string> Select(double threshold = 3, size_t max_chars = 4000) const;
  // The lexical shortlist for a rule: (rule, similarity), best first.
  std::vector<std::pair<std::string, double>> Shortlist(const std::string& rule) const;

  // Lower case, quotes and punctuation dropped, whitespace collapsed.
  static std::string Normalize(const std::string& rule);
  // A rule as stored: one line, whitespace collapsed, at most max_chars.
  static std::string CleanRule(const std::string& rule, size_t max_chars);

 private:
  struct Entry {
    Rule rule;
    std::string norm;
    std::vector<std::string> features;
  };
  int64_t Now() const;
  void InsertLocked(Rule r);
  void BumpLocked(size_t i, double by, const RuleExample& ex);
  void AddExampleLocked(Rule* r, const RuleExample& ex) const;
  void RebuildLocked();
  void MergeLocked(Rule r);
  std::string ToTextLocked() const;
  nlohmann::json ToJsonLocked() const;
  Status SaveImpl(const std::string& path, bool only_if_changed) const;
  std::vector<std::pair<size_t, double>> ShortlistLocked(const std::vector<std::string>& features) const;
  // Asks the LLM which of `cands` forbids the same action as `rule`: an index
  // into cands, -1 for none; false when the call failed (*error says why).
  bool AskLlm(const std::string& rule, const std::vector<std::string>& cands, const std::string& task, int* pick,
              std::string* error) const;
  void ReplaceWith(std::vector<Rule> rules);

  MemoryOptions opts_;
  llm::LlmClient* llm_ = nullptr;
  std::string dedup_template_;

  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> by_text_, by_norm_;
  std::unordered_map<std::string, std::vector<uint32_t>> postings_;  // feature -> entries
  uint64_t version_ = 0;

  mutable std::mutex save_mu_;  // serialises writers, so a file only moves forward
  mutable std::unordered_map<std::string, uint64_t> saved_version_;
};

// The part of a judge error worth keeping as an example: its last lines
// (where a traceback says what went wrong), at most max_chars.
std::string ErrorExcerpt(const std::string& error, size_t max_chars);

}  // namespace ax::adapt
