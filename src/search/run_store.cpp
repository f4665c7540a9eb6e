#include "search/run_store.h"

#include <sqlite3.h>

#include <ctime>

namespace ax::search {

namespace {
const char* kSchema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS llm_calls (task TEXT NOT NULL, seq INTEGER NOT NULL, purpose TEXT NOT NULL,"
    "  request_hash TEXT NOT NULL, record TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (task, seq));"
    "CREATE TABLE IF NOT EXISTS verdicts (task TEXT NOT NULL, cand_hash TEXT NOT NULL, verdict TEXT NOT NULL,"
    "  created REAL NOT NULL, PRIMARY KEY (task, cand_hash));"
    "CREATE TABLE IF NOT EXISTS trees (task TEXT PRIMARY KEY, tree TEXT NOT NULL, updated REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tasks (task TEXT PRIMARY KEY, status TEXT NOT NULL, summary TEXT NOT NULL,"
    "  updated REAL NOT NULL);";
}  // namespace

Status RunStore::Open(const std::string& path, std::unique_ptr<RunStore>* out) {
  std::unique_ptr<RunStore> s(new RunStore());
  s->path_ = path;
  if (sqlite3_open_v2(path.c_str(), &s->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string err = s->db_ ? sqlite3_errmsg(s->db_) : "out of memory";
    return Status::Error("cannot open run store " + path + ": " + err);
  }
  sqlite3_busy_timeout(s->db_, 15000);
  char* err = nullptr;
  if (sqlite3_exec(s->db_, kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string e = err ? err : "?";
    sqlite3_free(err);
    return Status::Error("run store " + path + " is unusable: " + e);
  }
  *out = std::move(s);
  return Status::Ok();
}

RunStore::~RunStore() {
  if (db_) sqlite3_close(db_);
}

Status RunStore::Exec(const std::string& sql, const std::vector<std::string>& args) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return Status::Error(std::string("run store: ") + sqlite3_errmsg(db_));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    sqlite3_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), static_cast<int>(args[i].size()), SQLITE_TRANSIENT);
  }
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    // A full disk lands here: say so, the caller stops the run cleanly.
    return Status::Error(std::string("run store write failed: ") + sqlite3_errstr(rc) + " (" + path_ + ")");
  }
  return Status::Ok();
}

std::optional<std::vector<std::string>> RunStore::Row(const std::string& sql, const std::vector<std::string>& args,
                                                      int cols) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return std::nullopt;
  for (size_t i = 0; i < args.size(); ++i) {
    sqlite3_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), static_cast<int>(args[i].size()), SQLITE_TRANSIENT);
  }
  std::optional<std::vector<std::string>> out;
  if (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < cols; ++c) {
      const unsigned char* v = sqlite3_column_text(st, c);
      row.push_back(v ? reinterpret_cast<const char*>(v) : "");
    }
    out = std::move(row);
  }
  sqlite3_finalize(st);
  return out;
}

static std::string Now() { return std::to_string(static_cast<double>(std::time(nullptr))); }

Status RunStore::PutMeta(const std::string& key, const std::string& value) {
  return Exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", {key, value});
}

std::optional<std::string> RunStore::GetMeta(const std::string& key) {
  auto r = Row("SELECT value FROM meta WHERE key = ?", {key}, 1);
  if (!r) return std::nullopt;
  return (*r)[0];
}

Status RunStore::PutCall(const std::string& task, int seq, const std::string& purpose, const std::string& request_hash,
                         const std::string& record_json) {
  return Exec("INSERT OR REPLACE INTO llm_calls (task, seq, purpose, request_hash, record, created) "
              "VALUES (?, ?, ?, ?, ?, ?)",
              {task, std::to_string(seq), purpose, request_hash, record_json, Now()});
}

std::optional<RunStore::StoredCall> RunStore::GetCall(const std::string& task, int seq) {
  auto r = Row("SELECT purpose, request_hash, record FROM llm_calls WHERE task = ? AND seq = ?",
               {task, std::to_string(seq)}, 3);
  if (!r) return std::nullopt;
  return StoredCall{(*r)[0], (*r)[1], (*r)[2]};
}

Status RunStore::PutVerdict(const std::string& task, const std::string& cand_hash, const std::string& verdict_json) {
  return Exec("INSERT OR REPLACE INTO verdicts (task, cand_hash, verdict, created) VALUES (?, ?, ?, ?)",
              {task, cand_hash, verdict_json, Now()});
}

std::optional<std::string> RunStore::GetVerdict(const std::string& task, const std::string& cand_hash) {
  auto r = Row("SELECT verdict FROM verdicts WHERE task = ? AND cand_hash = ?", {task, cand_hash}, 1);
  if (!r) return std::nullopt;
  return (*r)[0];
}

Status RunStore::PutTree(const std::string& task, const nlohmann::json& tree) {
  return Exec("INSERT OR REPLACE INTO trees (task, tree, updated) VALUES (?, ?, ?)", {task, tree.dump(), Now()});
}

std::optional<nlohmann::json> RunStore::GetTree(const std::string& task) {
  auto r = Row("SELECT tree FROM trees WHERE task = ?", {task}, 1);
  if (!r) return std::nullopt;
  try {
    return nlohmann::json::parse((*r)[0]);
  } catch (...) {
    return std::nullopt;
  }
}

Status RunStore::PutTask(const std::string& task, const std::string& status, const nlohmann::json& summary) {
  return Exec("INSERT OR REPLACE INTO tasks (task, status, summary, updated) VALUES (?, ?, ?, ?)",
              {task, status, summary.dump(), Now()});
}

std::optional<nlohmann::json> RunStore::GetTask(const std::string& task) {
  auto r = Row("SELECT status, summary FROM tasks WHERE task = ?", {task}, 2);
  if (!r) return std::nullopt;
  nlohmann::json j = {{"status", (*r)[0]}};
  try {
    j["summary"] = nlohmann::json::parse((*r)[1]);
  } catch (...) {
    j["summary"] = nullptr;
  }
  return j;
}

std::vector<std::string> RunStore::TaskNames() {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT task FROM tasks ORDER BY task", -1, &st, nullptr) != SQLITE_OK) return out;
  while (sqlite3_step(st) == SQLITE_ROW) out.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  return out;
}

}  // namespace ax::search
