// The tuner's edit format and its application to a parent kernel.
//
// A reply carries numbered blocks:
//
//   <old_str_1>
//   exact lines of the parent
//   </old_str_1>
//   <new_str_1>
//   their replacement
//   </new_str_1>
//
// Edits apply in number order, each to the text the previous ones left. Each
// is matched exactly first, then line by line ignoring differences in
// whitespace (indentation, runs of spaces, blank lines), re-indenting the new
// lines to where the match sits. An edit that matches nothing, or more than
// one place, is reported with a reason that can go back to the model; it is
// never silently skipped.
#pragma once

#include <string>
#include <vector>

namespace ax::llm {

struct Edit {
  int number = 0;
  std::string old_text, new_text;
};

struct ParsedEdits {
  std::vector<Edit> edits;
  std::vector<std::string> problems;  // malformed blocks, one line each
};

ParsedEdits ParseEdits(const std::string& reply);

enum class EditHow { kExact, kWhitespace, kNoMatch, kAmbiguous, kInvalid };
const char* EditHowName(EditHow h);

struct EditOutcome {
  int number = 0;
  EditHow how = EditHow::kNoMatch;
  int matches = 0;
  std::string message;  // one line
  bool applied() const { return how == EditHow::kExact || how == EditHow::kWhitespace; }
};

struct EditReport {
  std::string text;                   // the parent with every applicable edit applied
  std::vector<EditOutcome> outcomes;  // one per edit, in order
  std::vector<std::string> problems;  // from parsing
  bool all_applied() const;
  // Lines for the model: what applied, what did not, and why.
  std::string Summary() const;
};

EditReport ApplyEdits(const std::string& parent, const std::vector<Edit>& edits);
// ParseEdits + ApplyEdits; a reply with no edit blocks is a problem.
EditReport ApplyEditReply(const std::string& parent, const std::string& reply);

}  // namespace ax::llm
