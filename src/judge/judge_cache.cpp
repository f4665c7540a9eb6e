#include "judge/judge_cache.h"

#include <sqlite3.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

namespace ax {

namespace {
const char* kSchema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS baselines (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tasks (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL);";

bool ValidTable(const std::string& t) { return t == "verdicts" || t == "baselines" || t == "tasks"; }

bool IsBusy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

// SQLite answers some lock conflicts with SQLITE_BUSY at once, without its
// busy handler: a connection that would deadlock (two judges creating the
// schema of a new file together), a journal-mode switch, a stale WAL
// snapshot. Those are retried here for up to `seconds`.
template <typename F>
int Retrying(F&& attempt, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int rc;
  while (IsBusy(rc = attempt()) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rc;
}
}  // namespace

JudgeCache::JudgeCache(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    error_ = std::string("cannot open cache ") + path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    if (db_) sqlite3_close(db_);
    db_ = nullptr;
    return;
  }
  sqlite3_busy_timeout(db_, 10000);
  char* err = nullptr;
  int rc = Retrying(
      [&] {
        sqlite3_free(err);
        err = nullptr;
        return sqlite3_exec(db_, kSchema, nullptr, nullptr, &err);
      },
      10.0);
  if (rc != SQLITE_OK) {
    error_ = std::string("cache ") + path + " unusable: " + (err ? err : "?");
    sqlite3_free(err);
    sqlite3_close(db_);
    db_ = nullptr;
  }
}

JudgeCache::~JudgeCache() {
  if (db_) sqlite3_close(db_);
}

std::optional<std::string> JudgeCache::Get(const std::string& table, const std::string& key) {
  if (auto local = GetLocal(table, key)) return local;
  if (!shared_) return std::nullopt;
  auto hit = shared_->Get(table, key);
  if (hit) PutLocal(table, key, *hit);
  return hit;
}

void JudgeCache::Put(const std::string& table, const std::string& key, const std::string& value) {
  PutLocal(table, key, value);
  if (shared_) shared_->Put(table, key, value);
}

std::optional<std::string> JudgeCache::GetLocal(const std::string& table, const std::string& key) {
  if (!db_ || !ValidTable(table)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql = "SELECT value FROM " + table + " WHERE key = ?";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return std::nullopt;
  sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
  std::optional<std::string> out;
  if (sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* v = sqlite3_column_text(st, 0);
    if (v) out = std::string(reinterpret_cast<const char*>(v));
  }
  sqlite3_finalize(st);
  return out;
}

void JudgeCache::PutLocal(const std::string& table, const std::string& key, const std::string& value) {
  if (!db_ || !ValidTable(table)) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql = "INSERT OR REPLACE INTO " + table + " (key, value, created) VALUES (?, ?, ?)";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return;
  sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, value.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, static_cast<double>(std::time(nullptr)));
  // A full disk, or a file locked for longer than the retries, only costs
  // the cache entry.
  Retrying(
      [&] {
        sqlite3_reset(st);
        return sqlite3_step(st);
      },
      10.0);
  sqlite3_finalize(st);
}

}  // namespace ax
