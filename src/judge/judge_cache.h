// JudgeCache: a SQLite (WAL) key-value store of verdicts and baseline
// timings, shared safely by concurrent threads and processes.
//
// Verdicts are keyed by (task hash, candidate hash, protocol, device, torch);
// baselines by (task hash, mode, timing protocol, device, torch). A corrupt
// or unwritable cache file degrades to no caching, never to a failed judge.
#pragma once

#include <mutex>
#include <optional>
#include <string>

struct sqlite3;

namespace ax {

class JudgeCache {
 public:
  // Opens (creating) the database; on failure the cache is disabled and
  // error() says why.
  explicit JudgeCache(const std::string& path);
  ~JudgeCache();
  JudgeCache(const JudgeCache&) = delete;
  JudgeCache& operator=(const JudgeCache&) = delete;

  bool enabled() const { return db_ != nullptr; }
  const std::string& error() const { return error_; }

  std::optional<std::string> Get(const std::string& table, const std::string& key);
  void Put(const std::string& table, const std::string& key, const std::string& value);

 private:
  sqlite3* db_ = nullptr;
  std::string error_;
  std::mutex mu_;
};

}  // namespace ax
