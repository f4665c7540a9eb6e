#include "adapt/memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <unordered_set>

#include "common/util.h"
#include "search/prompts.h"
#include "search/skill_rules.h"

namespace ax::adapt {

namespace {

// Words that every rule shares; they carry no meaning for similarity.
const std::unordered_set<std::string>& StopWords() {
  static const std::unordered_set<std::string> w = {
      "you", "cannot", "can", "not", "t",    "the",  "a",     "an",   "to",   "of",    "in",
      "on",  "for",    "and", "or",  "is",   "are",  "be",    "it",   "its",  "this",  "that",
      "with", "as",    "by",  "at",  "from", "when", "which", "must", "should", "do", "does"};
  return w;
}

std::vector<std::string> FeaturesOf(const std::string& norm) {
  std::vector<std::string> words;
  std::istringstream in(norm);
  std::string w;
  while (in >> w) {
    if (!StopWords().count(w)) words.push_back(w);
  }
  std::vector<std::string> f = words;
  for (size_t i = 0; i + 1 < words.size(); ++i) f.push_back(words[i] + " " + words[i + 1]);
  std::sort(f.begin(), f.end());
  f.erase(std::unique(f.begin(), f.end()), f.end());
  return f;
}

std::string FormatScore(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.1f", v);  // the reference writes 34.0
    return buf;
  }
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

Status WriteFileAtomic(const std::string& path, const std::string& data) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  auto fail = [&](const char* what) {
    std::string msg = "cannot write memory file " + path + ": " + what + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return Status::Error(msg);
  };
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error("cannot write memory file " + path + ": " + std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      errno = e;
      return fail("write");
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return fail("fsync");
  }
  if (close(fd) != 0) return fail("close");
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("rename");
  return Status::Ok();
}

std::string StripThinking(std::string s) {
  for (;;) {
    size_t a = s.find("<think>");
    if (a == std::string::npos) break;
    size_t b = s.find("</think>", a);
    s.erase(a, b == std::string::npos ? std::string::npos : b + 8 - a);
  }
  return s;
}

// The LLM's answer to the dedup prompt: the 1-based number of the matching
// rule, or none. Returns false when the reply says neither.
bool ParseDedupReply(const std::string& reply, size_t n, int* pick) {
  std::string t = Trim(StripThinking(reply));
  std::string low;
  for (char c : t) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!low.empty() && (low[0] == '*' || low[0] == '`' || low[0] == '"' || low[0] == '\'')) low.erase(0, 1);
  *pick = -1;
  if (low.rfind("none", 0) == 0 || low.rfind("no ", 0) == 0 || low == "no" || low.rfind("no.", 0) == 0 ||
      low.rfind("no,", 0) == 0) {
    return true;
  }
  size_t d = low.find_first_of("0123456789");
  if (d == std::string::npos) return false;
  size_t e = d;
  while (e < low.size() && std::isdigit(static_cast<unsigned char>(low[e]))) ++e;
  if (e - d > 6) return false;
  int v = std::stoi(low.substr(d, e - d));
  if (v == 0) return true;
  if (v < 1 || static_cast<size_t>(v) > n) return false;
  *pick = v - 1;
  return true;
}

Status ParseRulesText(const std::string& text, std::vector<Rule>* out) {
  std::vector<search::ScoredRule> parsed;
  Status s = search::ParseRuleLines(text, &parsed);
  if (!s.ok()) return s;
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (parsed[i].text.empty()) return Status::Error("rule " + std::to_string(i + 1) + " is empty");
    if (!std::isfinite(parsed[i].score)) return Status::Error("rule " + std::to_string(i + 1) + ": score is not finite");
    Rule r;
    r.text = parsed[i].text;
    r.score = parsed[i].score;
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

Status ParseRulesJson(const std::string& text, std::vector<Rule>* out) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return Status::Error(std::string("not valid JSON: ") + FirstLine(e.what(), 200));
  }
  const nlohmann::json* rules = nullptr;
  if (j.is_object() && j.contains("rules")) {
    rules = &j["rules"];
  } else if (j.is_array()) {
    rules = &j;
  }
  if (!rules || !rules->is_array()) return Status::Error("JSON memory needs a 'rules' list");
  auto num = [](const nlohmann::json& o, const char* k, int64_t* v) {
    if (!o.contains(k) || o[k].is_null()) return true;
    if (!o[k].is_number()) return false;
    *v = o[k].get<int64_t>();
    return true;
  };
  for (size_t i = 0; i < rules->size(); ++i) {
    const auto& o = (*rules)[i];
    std::string where = "rule " + std::to_string(i + 1) + ": ";
    if (!o.is_object()) return Status::Error(where + "not an object");
    if (!o.contains("rule") || !o["rule"].is_string()) return Status::Error(where + "'rule' must be a string");
    if (!o.contains("score") || !o["score"].is_number()) return Status::Error(where + "'score' must be a number");
    Rule r;
    r.text = o["rule"].get<std::string>();
    r.score = o["score"].get<double>();
    if (Trim(r.text).empty()) return Status::Error(where + "empty rule");
    if (!std::isfinite(r.score)) return Status::Error(where + "score is not finite");
    if (!num(o, "first_seen", &r.first_seen) || !num(o, "last_seen", &r.last_seen)) {
      return Status::Error(where + "'first_seen' and 'last_seen' must be numbers (unix seconds)");
    }
    if (o.contains("examples")) {
      if (!o["examples"].is_array()) return Status::Error(where + "'examples' must be a list");
      for (const auto& e : o["examples"]) {
        if (!e.is_object()) return Status::Error(where + "an example is not an object");
        RuleExample ex;
        if (e.contains("task") && !e["task"].is_string()) return Status::Error(where + "example 'task' must be a string");
        if (e.contains("error") && !e["error"].is_string()) return Status::Error(where + "example 'error' must be a string");
        ex.task = e.value("task", "");
        ex.error = e.value("error", "");
        if (!num(e, "time", &ex.time)) return Status::Error(where + "example 'time' must be a number");
        r.examples.push_back(std::move(ex));
      }
    }
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace

const char* MatchName(Match m) {
  switch (m) {
    case Match::kNew: return "new";
    case Match::kExact: return "exact";
    case Match::kNormalized: return "normalized";
    case Match::kLlm: return "llm";
  }
  return "?";
}

std::string ErrorExcerpt(const std::string& error, size_t max_chars) {
  std::string t = Trim(error);
  if (t.size() <= max_chars) return t;
  std::vector<std::string> lines;
  std::istringstream in(t);
  std::string l;
  while (std::getline(in, l)) {
    l = Trim(l);
    if (!l.empty()) lines.push_back(l);
  }
  std::string out;
  for (size_t i = lines.size(); i-- > 0;) {
    size_t need = lines[i].size() + (out.empty() ? 0 : 1);
    if (out.size() + need + 4 > max_chars) break;
    out = out.empty() ? lines[i] : lines[i] + "\n" + out;
  }
  if (out.empty()) {  // the last line alone is too long: its start
    const std::string& last = lines.empty() ? t : lines.back();
    return last.substr(0, max_chars > 3 ? max_chars - 3 : max_chars) + "...";
  }
  return "...\n" + out;
}

Memory::Memory(MemoryOptions opts) : opts_(std::move(opts)) {
  if (opts_.shortlist_size == 0) opts_.shortlist_size = 1;
  if (opts_.max_candidates == 0) opts_.max_candidates = 1;
}

int64_t Memory::Now() const { return opts_.now ? opts_.now() : static_cast<int64_t>(std::time(nullptr)); }

std::string Memory::Normalize(const std::string& rule) {
  std::string out;
  bool space = true;
  for (size_t i = 0; i < rule.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(rule[i]);
    // UTF-8 curly quotes (U+2018, U+2019, U+201C, U+201D) are quotes too.
    if (c == 0xE2 && i + 2 < rule.size() && static_cast<unsigned char>(rule[i + 1]) == 0x80) {
      unsigned char c3 = static_cast<unsigned char>(rule[i + 2]);
      if (c3 == 0x98 || c3 == 0x99 || c3 == 0x9C || c3 == 0x9D) {
        i += 2;
        continue;
      }
    }
    if (c == '\'' || c == '"' || c == '`') continue;
    if (c >= 0x80 || std::isalnum(c) || c == '_') {
      out += static_cast<char>(std::tolower(c));
      space = false;
    } else if (!space) {
      out += ' ';
      space = true;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string Memory::CleanRule(const std::string& rule, size_t max_chars) {
  std::string out;
  bool space = false;
  for (char c : Trim(rule)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  // A leading '#' would read back as a comment in the text format.
  size_t h = out.find_first_not_of("# ");
  out = h == std::string::npos ? "" : out.substr(h);
  if (out.size() > max_chars) {
    out.resize(max_chars);
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();  // whole UTF-8
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
  }
  return out;
}

void Memory::AddExampleLocked(Rule* r, const RuleExample& ex) const {
  if (ex.task.empty() && ex.error.empty()) return;
  RuleExample e = ex;
  e.error = ErrorExcerpt(ex.error, opts_.max_error_chars);
  if (!e.time) e.time = Now();
  r->examples.push_back(std::move(e));
  if (r->examples.size() > opts_.max_examples) {
    r->examples.erase(r->examples.begin(), r->examples.end() - static_cast<long>(opts_.max_examples));
  }
}

void Memory::InsertLocked(Rule r) {
  Entry e;
  e.norm = Normalize(r.text);
  e.features = FeaturesOf(e.norm);
  e.rule = std::move(r);
  size_t i = entries_.size();
  by_text_.emplace(e.rule.text, i);
  by_norm_.emplace(e.norm, i);
  for (const auto& f : e.features) postings_[f].push_back(static_cast<uint32_t>(i));
  entries_.push_back(std::move(e));
  ++version_;
}

void Memory::BumpLocked(size_t i, double by, const RuleExample& ex) {
  Rule& r = entries_[i].rule;
  r.score += by;
  int64_t t = ex.time ? ex.time : Now();
  if (!r.first_seen || t < r.first_seen) r.first_seen = t;
  if (t > r.last_seen) r.last_seen = t;
  AddExampleLocked(&r, ex);
  ++version_;
}

void Memory::MergeLocked(Rule r) {
  r.text = CleanRule(r.text, opts_.max_rule_chars);
  if (r.text.empty()) return;
  std::optional<size_t> at;
  if (auto it = by_text_.find(r.text); it != by_text_.end()) {
    at = it->second;
  } else if (auto jt = by_norm_.find(Normalize(r.text)); jt != by_norm_.end()) {
    at = jt->second;
  }
  if (!at) {
    if (r.examples.size() > opts_.max_examples) {
      r.examples.erase(r.examples.begin(), r.examples.end() - static_cast<long>(opts_.max_examples));
    }
    InsertLocked(std::move(r));
    return;
  }
  Rule& have = entries_[*at].rule;
  have.score += r.score;
  if (r.first_seen && (!have.first_seen || r.first_seen < have.first_seen)) have.first_seen = r.first_seen;
  have.last_seen = std::max(have.last_seen, r.last_seen);
  for (auto& e : r.examples) have.examples.push_back(std::move(e));
  std::stable_sort(have.examples.begin(), have.examples.end(),
                   [](const RuleExample& a, const RuleExample& b) { return a.time < b.time; });
  if (have.examples.size() > opts_.max_examples) {
    have.examples.erase(have.examples.begin(), have.examples.end() - static_cast<long>(opts_.max_examples));
  }
  ++version_;
}

void Memory::RebuildLocked() {
  by_text_.clear();
  by_norm_.clear();
  postings_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) {
    by_text_.emplace(entries_[i].rule.text, i);
    by_norm_.emplace(entries_[i].norm, i);
    for (const auto& f : entries_[i].features) postings_[f].push_back(static_cast<uint32_t>(i));
  }
}

void Memory::ReplaceWith(std::vector<Rule> rules) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  RebuildLocked();
  for (auto& r : rules) MergeLocked(std::move(r));
  ++version_;
}

std::vector<std::pair<size_t, double>> Memory::ShortlistLocked(const std::vector<std::string>& features) const {
  std::vector<std::pair<size_t, double>> out;
  if (features.empty() || entries_.empty()) return out;
  double n = static_cast<double>(entries_.size());
  auto df = [&](const std::string& f) -> size_t {
    auto it = postings_.find(f);
    return it == postings_.end() ? 0 : it->second.size();
  };
  // Smoothed idf: words many rules share weigh less, so rules meet on what
  // they forbid (an identifier, an argument) more than on phrasing, while a
  // young memory, where every word is shared, still finds its neighbours.
  // Bigrams (they hold a space) count half: they order near-ties.
  auto idf = [&](const std::string& f) {
    double w = std::log(1.0 + (n + 1.0) / (static_cast<double>(df(f)) + 0.5));
    return f.find(' ') == std::string::npos ? w : 0.5 * w;
  };

  // Candidates: rules sharing a word with the new one, rarest words first,
  // at most max_candidates of them (so the cost does not grow with the memory).
  std::vector<const std::string*> order;
  for (const auto& f : features) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [&](const std::string* a, const std::string* b) { return df(*a) < df(*b); });
  std::vector<uint32_t> cands;
  std::unordered_set<uint32_t> seen;
  for (const std::string* f : order) {
    auto it = postings_.find(*f);
    if (it == postings_.end()) continue;
    const auto& p = it->second;
    for (size_t k = p.size(); k-- > 0 && cands.size() < opts_.max_candidates;) {
      if (seen.insert(p[k]).second) cands.push_back(p[k]);
    }
    if (cands.size() >= opts_.max_candidates) break;
  }

  std::unordered_map<std::string, double> qw;
  double qsum = 0;
  for (const auto& f : features) qsum += qw[f] = idf(f);
  for (uint32_t c : cands) {
    double inter = 0, other = 0;
    for (const auto& f : entries_[c].features) {
      auto it = qw.find(f);
      if (it != qw.end()) {
        inter += it->second;
      } else {
        other += idf(f);
      }
    }
    double uni = qsum + other;
    double sim = uni > 0 ? inter / uni : 0;
    if (sim >= opts_.min_similarity) out.push_back({c, sim});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (out.size() > opts_.shortlist_size) out.resize(opts_.shortlist_size);
  return out;
}

Status Memory::SetLlm(llm::LlmClient* client, const std::string& prompts_dir) {
  if (!client) {
    llm_ = nullptr;
    return Status::Ok();
  }
  std::string dir = prompts_dir.empty() ? search::Prompts::DefaultDir() : prompts_dir;
  auto t = ReadFile(dir + "/rule_dedup.txt");
  if (!t) return Status::Error("prompt template missing: " + dir + "/rule_dedup.txt");
  std::string probe;
  Status s = search::RenderTemplate(*t, {{"rule", "x"}, {"candidates", "1. y"}}, &probe);
  if (!s.ok()) return Status::Error(dir + "/rule_dedup.txt: " + s.message());
  dedup_template_ = *t;
  llm_ = client;
  return Status::Ok();
}

bool Memory::AskLlm(const std::string& rule, const std::vector<std::string>& cands, const std::string& task, int* pick,
                    std::string* error) const {
  std::string list;
  for (size_t i = 0; i < cands.size(); ++i) list += std::to_string(i + 1) + ". " + cands[i] + "\n";
  llm::ChatRequest req;
  Status s = search::RenderTemplate(dedup_template_, {{"rule", rule}, {"candidates", Trim(list)}}, &req.messages.emplace_back().content);
  req.messages.back().role = "user";
  if (!s.ok()) {
    *error = "rule_dedup.txt: " + s.message();
    return false;
  }
  req.max_tokens = opts_.llm_max_tokens;
  req.task = task;
  req.purpose = "rule_dedup";
  llm::ChatResult r = llm_->ChatSync(std::move(req));
  if (!r.ok()) {
    *error = "dedup LLM call failed: " + r.status.message();
    return false;
  }
  if (!ParseDedupReply(r.reply.text, cands.size(), pick)) {
    *error = "dedup LLM reply names no rule: " + FirstLine(r.reply.text, 120);
    return false;
  }
  return true;
}

AddResult Memory::Add(const std::string& rule_in, const RuleExample& example) {
  AddResult res;
  std::string rule = CleanRule(rule_in, opts_.max_rule_chars);
  if (rule.empty()) {
    res.status = Status::Error("empty rule");
    return res;
  }
  const std::string norm = Normalize(rule);
  const std::vector<std::string> features = FeaturesOf(norm);
  RuleExample ex = example;
  if (!ex.time) ex.time = Now();
  std::unordered_set<std::string> shown;  // rules the LLM already judged different
  bool ask = llm_ != nullptr;

  std::unique_lock<std::mutex> lock(mu_);
  for (int round = 0;; ++round) {
    // Exact and normalised matches, re-checked each round: another task may
    // have added the same rule while the LLM was thinking.
    std::optional<size_t> at;
    Match m = Match::kExact;
    if (auto it = by_text_.find(rule); it != by_text_.end()) {
      at = it->second;
    } else if (auto jt = by_norm_.find(norm); jt != by_norm_.end()) {
      at = jt->second;
      m = Match::kNormalized;
    }
    if (at) {
      BumpLocked(*at, 1, ex);
      res.match = m;
      res.rule = entries_[*at].rule.text;
      res.score = entries_[*at].rule.score;
      return res;
    }
    std::vector<std::string> cands;
    if (ask && round < opts_.llm_rounds) {
      for (const auto& [i, sim] : ShortlistLocked(features)) {
        if (!shown.count(entries_[i].rule.text)) cands.push_back(entries_[i].rule.text);
      }
    }
    if (cands.empty()) {
      Rule r;
      r.text = rule;
      r.score = 1;
      r.first_seen = r.last_seen = ex.time;
      AddExampleLocked(&r, ex);
      InsertLocked(std::move(r));
      res.match = Match::kNew;
      res.rule = rule;
      res.score = 1;
      return res;
    }
    // The LLM decides over the shortlist only, without the lock.
    lock.unlock();
    int pick = -1;
    std::string err;
    bool ok = AskLlm(rule, cands, ex.task, &pick, &err);
    lock.lock();
    ++res.llm_calls;
    res.shown_to_llm += cands.size();
    if (!ok) {
      res.llm_error = err;
      ask = false;  // no further rounds: keep it as new unless it matches exactly
      continue;
    }
    if (pick >= 0) {
      auto hit = by_text_.find(cands[pick]);
      if (hit != by_text_.end()) {  // still there (not pruned meanwhile)
        BumpLocked(hit->second, 1, ex);
        res.match = Match::kLlm;
        res.rule = entries_[hit->second].rule.text;
        res.score = entries_[hit->second].rule.score;
        return res;
      }
    }
    for (auto& c : cands) shown.insert(std::move(c));
  }
}

size_t Memory::Prune(double min_score, size_t max_rules) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> keep;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].rule.score >= min_score) keep.push_back(i);
  }
  if (max_rules > 0 && keep.size() > max_rules) {
    std::stable_sort(keep.begin(), keep.end(),
                     [&](size_t a, size_t b) { return entries_[a].rule.score > entries_[b].rule.score; });
    keep.resize(max_rules);
    std::sort(keep.begin(), keep.end());
  }
  size_t removed = entries_.size() - keep.size();
  if (!removed) return 0;
  std::vector<Entry> next;
  next.reserve(keep.size());
  for (size_t i : keep) next.push_back(std::move(entries_[i]));
  entries_ = std::move(next);
  RebuildLocked();
  ++version_;
  return removed;
}

void Memory::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  RebuildLocked();
  ++version_;
}

size_t Memory::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

double Memory::total_score() const {
  std::lock_guard<std::mutex> lock(mu_);
  double t = 0;
  for (const auto& e : entries_) t += e.rule.score;
  return t;
}

uint64_t Memory::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::vector<Rule> Memory::Rules() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Rule> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.rule);
  return out;
}

std::optional<Rule> Memory::Find(const std::string& text) const {
  std::string t = CleanRule(text, opts_.max_rule_chars);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_text_.find(t); it != by_text_.end()) return entries_[it->second].rule;
  if (auto it = by_norm_.find(Normalize(t)); it != by_norm_.end()) return entries_[it->second].rule;
  return std::nullopt;
}

std::vector<std::string> Memory::Select(double threshold, size_t max_chars) const {
  std::vector<search::ScoredRule> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.reserve(entries_.size());
    for (const auto& e : entries_) all.push_back({e.rule.text, e.rule.score});
  }
  return search::SelectRules(all, threshold, max_chars);
}

std::vector<std::pair<std::string, double>> Memory::Shortlist(const std::string& rule) const {
  auto features = FeaturesOf(Normalize(CleanRule(rule, opts_.max_rule_chars)));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [i, sim] : ShortlistLocked(features)) out.push_back({entries_[i].rule.text, sim});
  return out;
}

void Memory::Merge(const Memory& other) {
  std::vector<Rule> rules = other.Rules();  // other's lock is released before ours is taken
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : rules) MergeLocked(std::move(r));
}

// ---- formats ----

std::string Memory::FormatOf(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".txt") return "text";
  if (ext == ".json") return "json";
  return "";
}

Status Memory::FromText(const std::string& text) {
  std::vector<Rule> rules;
  Status s = ParseRulesText(text, &rules);
  if (!s.ok()) return s;
  ReplaceWith(std::move(rules));
  return Status::Ok();
}

Status Memory::FromJson(const std::string& text) {
  std::vector<Rule> rules;
  Status s = ParseRulesJson(text, &rules);
  if (!s.ok()) return s;
  ReplaceWith(std::move(rules));
  return Status::Ok();
}

std::string Memory::ToTextLocked() const {
  std::string out;
  for (const auto& e : entries_) out += e.rule.text + "||" + FormatScore(e.rule.score) + "\n";
  return out;
}

nlohmann::json Memory::ToJsonLocked() const {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& e : entries_) {
    nlohmann::json ex = nlohmann::json::array();
    for (const auto& x : e.rule.examples) ex.push_back({{"task", x.task}, {"error", x.error}, {"time", x.time}});
    rules.push_back({{"rule", e.rule.text},
                     {"score", e.rule.score},
                     {"first_seen", e.rule.first_seen},
                     {"last_seen", e.rule.last_seen},
                     {"examples", ex}});
  }
  return {{"format", "adaexplore-memory"}, {"version", 1}, {"rules", rules}};
}

std::string Memory::ToText() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ToTextLocked();
}

nlohmann::json Memory::ToJson() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ToJsonLocked();
}

Status Memory::Load(const std::string& path, bool missing_ok) {
  std::error_code ec;
  if (missing_ok && !std::filesystem::exists(path, ec)) {
    Clear();
    return Status::Ok();
  }
  if (std::filesystem::is_directory(path, ec)) return Status::Error("memory file is a folder: " + path);
  auto text = ReadFile(path);
  if (!text) return Status::Error("cannot read memory file: " + path);
  std::string fmt = FormatOf(path);
  if (fmt.empty()) {
    size_t p = text->find_first_not_of(" \t\r\n");
    fmt = p != std::string::npos && ((*text)[p] == '{' || (*text)[p] == '[') ? "json" : "text";
  }
  Status s = fmt == "json" ? FromJson(*text) : FromText(*text);
  if (!s.ok()) return Status::Error(path + ": " + s.message());
  return Status::Ok();
}

Status Memory::SaveImpl(const std::string& path, bool only_if_changed) const {
  std::string fmt = FormatOf(path);
  if (fmt.empty()) return Status::Error("memory file must end in .txt (rule||score) or .json: " + path);
  std::lock_guard<std::mutex> save_lock(save_mu_);
  std::string data;
  uint64_t v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    v = version_;
    auto it = saved_version_.find(path);
    if (only_if_changed && it != saved_version_.end() && it->second == v) return Status::Ok();
    data = fmt == "text" ? ToTextLocked() : ToJsonLocked().dump(2) + "\n";
  }
  Status s = WriteFileAtomic(path, data);
  if (s.ok()) saved_version_[path] = v;
  return s;
}

Status Memory::Save(const std::string& path) const { return SaveImpl(path, false); }
Status Memory::SaveIfChanged(const std::string& path) const { return SaveImpl(path, true); }

}  // namespace ax::adapt
