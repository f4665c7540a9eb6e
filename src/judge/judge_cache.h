// JudgeCache: a SQLite (WAL) key-value store of verdicts and baseline
// timings, shared safely by concurrent threads and processes.
//
// Verdicts are keyed by (task hash, candidate hash, protocol, device, torch);
// baselines by (task hash, mode, timing protocol, device, torch). A corrupt
// or unwritable cache file degrades to no caching, never to a failed judge.
//
// A judge worker serving a broker also reads and writes a SharedCache (the
// broker's), so that a verdict or baseline measured on one host serves every
// host with the same GPU model and versions; the local file stays first.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

struct sqlite3;

namespace ax {

// A key-value cache shared across hosts. Failures are misses, never errors.
class SharedCache {
 public:
  virtual ~SharedCache() = default;
  virtual std::optional<std::string> Get(const std::string& table, const std::string& key) = 0;
  virtual void Put(const std::string& table, const std::string& key, const std::string& value) = 0;
};

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
  // Also read (after the local file) and write the shared cache.
  void SetShared(std::shared_ptr<SharedCache> shared) { shared_ = std::move(shared); }

 private:
  std::optional<std::string> GetLocal(const std::string& table, const std::string& key);
  void PutLocal(const std::string& table, const std::string& key, const std::string& value);

  std::shared_ptr<SharedCache> shared_;
  sqlite3* db_ = nullptr;
  std::string error_;
  std::mutex mu_;
};

}  // namespace ax
