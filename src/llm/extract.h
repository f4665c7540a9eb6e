// Code extraction from a model's reply: the first fenced block that names a
// language, else the first fenced block of any kind, else the whole text.
#pragma once

#include <string>

namespace ax::llm {

enum class ExtractHow { kTaggedFence, kFence, kWholeText };

struct Extracted {
  std::string code;
  std::string lang;           // the fence's info word, e.g. "python"
  ExtractHow how = ExtractHow::kWholeText;
  bool unterminated = false;  // the fence never closed (a truncated reply)
};

Extracted ExtractCode(const std::string& reply);
const char* ExtractHowName(ExtractHow h);

}  // namespace ax::llm
