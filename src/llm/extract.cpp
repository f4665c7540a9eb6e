#include "llm/extract.h"

#include <vector>

#include "common/util.h"

namespace ax::llm {

namespace {

struct Block {
  std::string lang, body;
  bool closed = false;
};

// A fence line: up to three spaces, then three or more ` or ~.
bool FenceOpen(const std::string& line, char* ch, size_t* len, std::string* info) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') i++;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  char c = line[i];
  size_t j = i;
  while (j < line.size() && line[j] == c) j++;
  if (j - i < 3) return false;
  std::string rest = Trim(line.substr(j));
  if (c == '`' && rest.find('`') != std::string::npos) return false;  // inline code
  *ch = c;
  *len = j - i;
  // The info string's first word is the language ("python {.numberLines}").
  size_t sp = rest.find_first_of(" \t{");
  *info = sp == std::string::npos ? rest : rest.substr(0, sp);
  return true;
}

bool FenceClose(const std::string& line, char ch, size_t len) {
  std::string t = Trim(line);
  if (t.size() < len) return false;
  for (char c : t)
    if (c != ch) return false;
  return true;
}

std::vector<Block> Blocks(const std::string& text) {
  std::vector<Block> out;
  size_t pos = 0;
  Block* open = nullptr;
  char ch = 0;
  size_t len = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (open) {
      if (FenceClose(line, ch, len)) {
        open->closed = true;
        open = nullptr;
      } else if (nl != std::string::npos || !line.empty()) {
        open->body += line;
        open->body += '\n';
      }
    } else {
      std::string info;
      if (FenceOpen(line, &ch, &len, &info)) {
        out.push_back(Block{info, "", false});
        open = &out.back();
      }
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

}  // namespace

const char* ExtractHowName(ExtractHow h) {
  switch (h) {
    case ExtractHow::kTaggedFence: return "tagged_fence";
    case ExtractHow::kFence: return "fence";
    default: return "whole_text";
  }
}

Extracted ExtractCode(const std::string& reply) {
  std::vector<Block> blocks = Blocks(reply);
  const Block* pick = nullptr;
  for (const auto& b : blocks)
    if (!b.lang.empty()) {
      pick = &b;
      break;
    }
  Extracted e;
  if (pick) {
    e.how = ExtractHow::kTaggedFence;
  } else if (!blocks.empty()) {
    pick = &blocks.front();
    e.how = ExtractHow::kFence;
  }
  if (!pick) {
    e.code = Trim(reply);
    if (!e.code.empty()) e.code += '\n';
    return e;
  }
  e.code = pick->body;
  e.lang = pick->lang;
  e.unterminated = !pick->closed;
  return e;
}

}  // namespace ax::llm
