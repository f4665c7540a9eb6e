#include "cli/memory_cmd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "adapt/memory.h"
#include "common/util.h"

namespace ax::cli {

namespace {

constexpr int kExitBadInput = 2;

int Fail(const std::string& msg) {
  std::fprintf(stderr, "adaexplore: memory: %s\n", msg.c_str());
  return kExitBadInput;
}

std::string Score(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::floor(v) && std::fabs(v) < 1e9 ? "%.0f" : "%.2f", v);
  return buf;
}

std::string Date(int64_t t) {
  if (!t) return "?";
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

bool Exists(const std::string& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

// Best first; ties keep the file's order.
std::vector<adapt::Rule> Ranked(const adapt::Memory& m, double min_score) {
  auto rules = m.Rules();
  std::stable_sort(rules.begin(), rules.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
  if (!std::isnan(min_score)) {
    rules.erase(std::remove_if(rules.begin(), rules.end(), [&](const auto& r) { return r.score < min_score; }),
                rules.end());
  }
  return rules;
}

int Show(const MemoryFlags& f) {
  adapt::Memory m;
  if (Status s = m.Load(f.file); !s.ok()) return Fail(s.message());
  auto rules = Ranked(m, f.min_score);
  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : rules) {
      nlohmann::json ex = nlohmann::json::array();
      for (const auto& x : r.examples) ex.push_back({{"task", x.task}, {"error", x.error}, {"time", x.time}});
      arr.push_back({{"rule", r.text}, {"score", r.score}, {"first_seen", r.first_seen}, {"last_seen", r.last_seen},
                     {"examples", ex}});
    }
    std::cout << nlohmann::json{{"file", f.file}, {"rules_in_file", m.size()}, {"total_score", m.total_score()},
                                {"rules", arr}}
                     .dump(2)
              << std::endl;
    return 0;
  }
  size_t injected = m.Select().size();
  std::cout << f.file << ": " << m.size() << " rules, total score " << Score(m.total_score()) << "; " << injected
            << " go into prompts (score >= 3, within 4000 characters)";
  if (!std::isnan(f.min_score)) std::cout << "; showing " << rules.size() << " with score >= " << Score(f.min_score);
  std::cout << "\n";
  for (const auto& r : rules) {
    std::printf("%6s  %s\n", Score(r.score).c_str(), r.text.c_str());
    if (r.last_seen || !r.examples.empty()) {
      std::string line = "        seen " + Date(r.first_seen) + " .. " + Date(r.last_seen);
      if (!r.examples.empty()) {
        const auto& e = r.examples.back();
        line += "; latest: " + (e.task.empty() ? std::string("?") : e.task) + ": " + FirstLine(e.error, 100);
      }
      std::printf("%s\n", line.c_str());
    }
  }
  return 0;
}

int Import(const MemoryFlags& f) {
  if (adapt::Memory::FormatOf(f.dst).empty()) return Fail("DST must end in .txt (rule||score) or .json: " + f.dst);
  std::error_code ec;
  if (Exists(f.dst) && std::filesystem::equivalent(f.src, f.dst, ec)) return Fail("SRC and DST are the same file: " + f.dst);
  adapt::Memory src;
  if (Status s = src.Load(f.src); !s.ok()) return Fail(s.message());
  adapt::Memory dst;
  if (Status s = dst.Load(f.dst, /*missing_ok=*/true); !s.ok()) return Fail(s.message());
  size_t before = dst.size();
  dst.Merge(src);
  size_t added = dst.size() - before;
  if (Status s = dst.Save(f.dst); !s.ok()) return Fail(s.message());
  std::printf("imported %zu rules from %s into %s: %zu new, %zu merged into existing rules; %zu rules in all\n",
              src.size(), f.src.c_str(), f.dst.c_str(), added, src.size() - added, dst.size());
  return 0;
}

int Export(const MemoryFlags& f) {
  bool to_stdout = f.dst == "-";
  if (!to_stdout && adapt::Memory::FormatOf(f.dst).empty()) {
    return Fail("DST must end in .txt (rule||score) or .json, or be '-' for stdout: " + f.dst);
  }
  adapt::Memory m;
  if (Status s = m.Load(f.src); !s.ok()) return Fail(s.message());
  if (to_stdout) {
    std::cout << m.ToText() << std::flush;
    return 0;
  }
  if (Status s = m.Save(f.dst); !s.ok()) return Fail(s.message());
  std::printf("wrote %zu rules to %s\n", m.size(), f.dst.c_str());
  return 0;
}

int Prune(const MemoryFlags& f) {
  if (std::isnan(f.min_score) && f.max_rules == 0) return Fail("prune needs --min-score S and/or --max-rules N");
  if (f.max_rules < 0) return Fail("--max-rules must be 0 or more");
  if (adapt::Memory::FormatOf(f.file).empty()) return Fail("FILE must end in .txt (rule||score) or .json: " + f.file);
  adapt::Memory m;
  if (Status s = m.Load(f.file); !s.ok()) return Fail(s.message());
  double min = std::isnan(f.min_score) ? -std::numeric_limits<double>::infinity() : f.min_score;
  size_t removed = m.Prune(min, static_cast<size_t>(f.max_rules));
  if (Status s = m.Save(f.file); !s.ok()) return Fail(s.message());
  std::printf("pruned %zu rules; %zu left in %s\n", removed, m.size(), f.file.c_str());
  return 0;
}

}  // namespace

void RegisterMemoryCommand(CLI::App& app, MemoryFlags* f, CLI::App** sub) {
  CLI::App* m = app.add_subcommand("memory", "show, import, export or prune a skill memory (.txt rule||score or .json)");
  m->require_subcommand(1);
  *sub = m;

  CLI::App* show = m->add_subcommand("show", "list the rules, best first");
  show->add_option("FILE", f->file, "memory file (.txt or .json)")->required();
  show->add_option("--min-score", f->min_score, "only rules scoring at least S");
  show->add_flag("--json", f->json, "print JSON");
  show->callback([f] { f->action = "show"; });

  CLI::App* imp = m->add_subcommand("import", "merge SRC into DST (created if missing; .txt or .json)");
  imp->add_option("SRC", f->src, "memory file to read")->required();
  imp->add_option("DST", f->dst, "memory file to merge into")->required();
  imp->callback([f] { f->action = "import"; });

  CLI::App* exp = m->add_subcommand("export", "write SRC in DST's format (.txt or .json; '-': text on stdout)");
  exp->add_option("SRC", f->src, "memory file to read")->required();
  exp->add_option("DST", f->dst, "file to write (replaced)")->required();
  exp->callback([f] { f->action = "export"; });

  CLI::App* prune = m->add_subcommand("prune", "drop low-scoring rules, in place");
  prune->add_option("FILE", f->file, "memory file (.txt or .json)")->required();
  prune->add_option("--min-score", f->min_score, "drop rules scoring below S");
  prune->add_option("--max-rules", f->max_rules, "keep at most N rules, the best");
  prune->callback([f] { f->action = "prune"; });
}

int RunMemoryCommand(const MemoryFlags& f) {
  if (f.action == "show") return Show(f);
  if (f.action == "import") return Import(f);
  if (f.action == "export") return Export(f);
  if (f.action == "prune") return Prune(f);
  return Fail("unknown action '" + f.action + "' (show, import, export, prune)");
}

}  // namespace ax::cli
