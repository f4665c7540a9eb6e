// RunStore: everything a run did, in one SQLite file (WAL) in the run's
// folder: the configuration, every LLM call (request, reply, usage, timing,
// error), every verdict and node of every task's tree, and per-task
// summaries. A run that was killed is resumed by re-running it against the
// store: recorded calls and verdicts are served from here, so nothing already
// asked or judged is asked or judged again, and the tree comes out the same.
// Safe for concurrent use by the tasks of one run.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

struct sqlite3;

namespace ax::search {

class RunStore {
 public:
  static Status Open(const std::string& path, std::unique_ptr<RunStore>* out);
  ~RunStore();

  Status PutMeta(const std::string& key, const std::string& value);
  std::optional<std::string> GetMeta(const std::string& key);

  // The seq-th LLM call of a task's search: the recorder's JSON line.
  Status PutCall(const std::string& task, int seq, const std::string& purpose, const std::string& request_hash,
                 const std::string& record_json);
  struct StoredCall {
    std::string purpose, request_hash, record_json;
  };
  std::optional<StoredCall> GetCall(const std::string& task, int seq);

  Status PutVerdict(const std::string& task, const std::string& cand_hash, const std::string& verdict_json);
  std::optional<std::string> GetVerdict(const std::string& task, const std::string& cand_hash);

  Status PutTree(const std::string& task, const nlohmann::json& tree);
  std::optional<nlohmann::json> GetTree(const std::string& task);
  Status PutTask(const std::string& task, const std::string& status, const nlohmann::json& summary);
  std::optional<nlohmann::json> GetTask(const std::string& task);  // {"status", "summary"}
  std::vector<std::string> TaskNames();

  const std::string& path() const { return path_; }

 private:
  RunStore() = default;
  Status Exec(const std::string& sql, const std::vector<std::string>& args);
  std::optional<std::vector<std::string>> Row(const std::string& sql, const std::vector<std::string>& args, int cols);

  sqlite3* db_ = nullptr;
  std::string path_;
  std::mutex mu_;
};

}  // namespace ax::search
