#include "llm/edits.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/util.h"

namespace ax::llm {

namespace {

// Drops the newline right after an opening tag and right before a closing
// one, and a Markdown fence the model may have wrapped the code in.
std::string CleanBlock(std::string s) {
  if (s.rfind("\r\n", 0) == 0) s.erase(0, 2);
  else if (!s.empty() && s[0] == '\n') s.erase(0, 1);
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, "\r\n") == 0) s.resize(s.size() - 2);
  else if (!s.empty() && s.back() == '\n') s.pop_back();
  std::string t = Trim(s);
  if (t.rfind("```", 0) == 0 && t.size() >= 6 && t.compare(t.size() - 3, 3, "```") == 0) {
    size_t first_nl = t.find('\n');
    size_t last_nl = t.rfind('\n');
    if (first_nl != std::string::npos && last_nl > first_nl) return t.substr(first_nl + 1, last_nl - first_nl - 1);
    if (first_nl != std::string::npos && last_nl == first_nl) return "";
  }
  return s;
}

// Parses "<NAME>" or "<NAME_123>" at `pos`; returns the tag's end, or npos.
size_t OpenTag(const std::string& s, size_t pos, const std::string& name, int* number) {
  std::string head = "<" + name;
  if (s.compare(pos, head.size(), head) != 0) return std::string::npos;
  size_t i = pos + head.size();
  if (i < s.size() && s[i] == '>') {
    *number = -1;
    return i + 1;
  }
  if (i >= s.size() || s[i] != '_') return std::string::npos;
  size_t j = ++i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) j++;
  if (j == i || j >= s.size() || s[j] != '>' || j - i > 6) return std::string::npos;
  *number = std::stoi(s.substr(i, j - i));
  return j + 1;
}

std::string Tag(const std::string& name, int number, bool close) {
  return std::string(close ? "</" : "<") + name + (number >= 0 ? "_" + std::to_string(number) : "") + ">";
}

std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t nl = s.find('\n', pos);
    out.push_back(s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

std::string Normalize(const std::string& line) {
  std::string out;
  bool space = false;
  for (char c : line) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string Indent(const std::string& line) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) i++;
  return line.substr(0, i);
}

int LineOf(const std::string& text, size_t offset) {
  return 1 + int(std::count(text.begin(), text.begin() + std::min(offset, text.size()), '\n'));
}

std::string LinesList(const std::vector<int>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < 5; i++) out += (i ? ", " : "") + std::to_string(lines[i]);
  if (lines.size() > 5) out += ", ...";
  return out;
}

std::string FirstNonBlank(const std::string& s) {
  for (const auto& l : SplitLines(s))
    if (!Trim(l).empty()) return FirstLine(l, 80);
  return "";
}

}  // namespace

const char* EditHowName(EditHow h) {
  switch (h) {
    case EditHow::kExact: return "exact";
    case EditHow::kWhitespace: return "whitespace";
    case EditHow::kNoMatch: return "no_match";
    case EditHow::kAmbiguous: return "ambiguous";
    default: return "invalid";
  }
}

ParsedEdits ParseEdits(const std::string& reply) {
  ParsedEdits out;
  std::set<int> seen;
  int seq = 0;
  size_t pos = 0;
  while ((pos = reply.find("<old_str", pos)) != std::string::npos) {
    int n = 0;
    size_t body = OpenTag(reply, pos, "old_str", &n);
    if (body == std::string::npos) {
      pos += 8;
      continue;
    }
    seq++;
    int number = n >= 0 ? n : seq;
    std::string label = "edit " + std::to_string(number);
    size_t close = reply.find(Tag("old_str", n, true), body);
    if (close == std::string::npos) {
      out.problems.push_back(label + ": " + Tag("old_str", n, false) + " is never closed by " + Tag("old_str", n, true));
      break;
    }
    size_t after_old = close + Tag("old_str", n, true).size();
    size_t next_old = reply.find("<old_str", after_old);
    size_t nopen = reply.find(Tag("new_str", n, false), after_old);
    if (nopen == std::string::npos || (next_old != std::string::npos && nopen > next_old)) {
      out.problems.push_back(label + ": no " + Tag("new_str", n, false) + " block follows its old_str");
      pos = after_old;
      continue;
    }
    size_t nbody = nopen + Tag("new_str", n, false).size();
    size_t nclose = reply.find(Tag("new_str", n, true), nbody);
    if (nclose == std::string::npos) {
      out.problems.push_back(label + ": " + Tag("new_str", n, false) + " is never closed by " + Tag("new_str", n, true));
      break;
    }
    pos = nclose + Tag("new_str", n, true).size();
    if (!seen.insert(number).second) {
      out.problems.push_back(label + ": the number is used twice; the later block was not applied");
      continue;
    }
    out.edits.push_back(Edit{number, CleanBlock(reply.substr(body, close - body)),
                             CleanBlock(reply.substr(nbody, nclose - nbody))});
  }
  std::stable_sort(out.edits.begin(), out.edits.end(),
                   [](const Edit& a, const Edit& b) { return a.number < b.number; });
  return out;
}

namespace {

EditOutcome ApplyOne(std::string* text, const Edit& e) {
  EditOutcome o;
  o.number = e.number;
  std::string label = "edit " + std::to_string(e.number) + ": ";
  if (Trim(e.old_text).empty()) {
    o.how = EditHow::kInvalid;
    o.message = label + "old_str is empty; to add code, quote the neighbouring lines in old_str and repeat them in new_str";
    return o;
  }
  // 1. Exact.
  std::vector<size_t> hits;
  for (size_t p = text->find(e.old_text); p != std::string::npos; p = text->find(e.old_text, p + 1))
    hits.push_back(p);
  if (hits.size() == 1) {
    text->replace(hits[0], e.old_text.size(), e.new_text);
    o.how = EditHow::kExact;
    o.matches = 1;
    o.message = label + "applied (exact match at line " + std::to_string(LineOf(*text, hits[0])) + ")";
    return o;
  }
  if (hits.size() > 1) {
    std::vector<int> lines;
    for (size_t p : hits) lines.push_back(LineOf(*text, p));
    o.how = EditHow::kAmbiguous;
    o.matches = int(hits.size());
    o.message = label + "old_str matches " + std::to_string(hits.size()) + " places (lines " + LinesList(lines) +
                "); include more surrounding lines so it matches exactly one";
    return o;
  }
  // 2. Line by line, ignoring whitespace and blank lines.
  std::vector<std::string> tl = SplitLines(*text);
  std::vector<size_t> nonblank;  // indices of non-blank text lines
  for (size_t i = 0; i < tl.size(); i++)
    if (!Trim(tl[i]).empty()) nonblank.push_back(i);
  std::vector<std::string> ol;
  std::string old_indent;
  bool first = true;
  for (const auto& l : SplitLines(e.old_text)) {
    if (Trim(l).empty()) continue;
    if (first) old_indent = Indent(l), first = false;
    ol.push_back(Normalize(l));
  }
  std::vector<std::string> tn;
  for (size_t i : nonblank) tn.push_back(Normalize(tl[i]));
  std::vector<size_t> starts;  // positions in `nonblank`
  for (size_t k = 0; k + ol.size() <= tn.size(); k++) {
    bool eq = true;
    for (size_t j = 0; j < ol.size() && eq; j++) eq = tn[k + j] == ol[j];
    if (eq) starts.push_back(k);
  }
  if (starts.empty()) {
    o.how = EditHow::kNoMatch;
    o.message = label + "old_str matches nothing in the kernel, even ignoring whitespace (its first line: '" +
                FirstNonBlank(e.old_text) + "'); copy the lines exactly from the current kernel";
    return o;
  }
  if (starts.size() > 1) {
    std::vector<int> lines;
    for (size_t k : starts) lines.push_back(int(nonblank[k]) + 1);
    o.how = EditHow::kAmbiguous;
    o.matches = int(starts.size());
    o.message = label + "old_str matches " + std::to_string(starts.size()) +
                " places ignoring whitespace (lines " + LinesList(lines) +
                "); include more surrounding lines so it matches exactly one";
    return o;
  }
  size_t first_line = nonblank[starts[0]];
  size_t last_line = nonblank[starts[0] + ol.size() - 1];
  std::string text_indent = Indent(tl[first_line]);
  std::vector<std::string> repl;
  for (const auto& l : SplitLines(e.new_text)) {
    if (Trim(l).empty() || old_indent == text_indent) {
      repl.push_back(l);
    } else if (l.rfind(old_indent, 0) == 0) {
      repl.push_back(text_indent + l.substr(old_indent.size()));
    } else {
      repl.push_back(l);
    }
  }
  if (e.new_text.empty()) repl.clear();
  std::vector<std::string> out(tl.begin(), tl.begin() + first_line);
  out.insert(out.end(), repl.begin(), repl.end());
  out.insert(out.end(), tl.begin() + last_line + 1, tl.end());
  std::string joined;
  for (size_t i = 0; i < out.size(); i++) {
    if (i) joined += '\n';
    joined += out[i];
  }
  *text = std::move(joined);
  o.how = EditHow::kWhitespace;
  o.matches = 1;
  o.message = label + "applied (matched ignoring whitespace at line " + std::to_string(first_line + 1) + ")";
  return o;
}

}  // namespace

bool EditReport::all_applied() const {
  if (!problems.empty() || outcomes.empty()) return false;
  for (const auto& o : outcomes)
    if (!o.applied()) return false;
  return true;
}

std::string EditReport::Summary() const {
  std::string s;
  for (const auto& p : problems) s += p + "\n";
  for (const auto& o : outcomes) s += o.message + "\n";
  return s;
}

EditReport ApplyEdits(const std::string& parent, const std::vector<Edit>& edits) {
  EditReport r;
  r.text = parent;
  for (const auto& e : edits) r.outcomes.push_back(ApplyOne(&r.text, e));
  return r;
}

EditReport ApplyEditReply(const std::string& parent, const std::string& reply) {
  ParsedEdits p = ParseEdits(reply);
  EditReport r = ApplyEdits(parent, p.edits);
  r.problems = std::move(p.problems);
  if (p.edits.empty() && r.problems.empty())
    r.problems.push_back("the reply holds no <old_str_N>/<new_str_N> edit blocks");
  return r;
}

}  // namespace ax::llm
