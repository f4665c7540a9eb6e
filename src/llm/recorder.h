// Recording: every LLM call (request, reply, usage, timing, error) as one
// record, handed to a CallSink. The JSONL sink writes one record per line;
// the same file is what `replay:FILE` reads, so `--record FILE` on a live run
// yields a file that reproduces it. API keys never enter a record: a record
// holds the request content, not the HTTP headers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "llm/client.h"

namespace ax::llm {

struct AttemptLog {
  long http_status = 0;      // 0: no response
  std::string error;         // one line; empty for the successful attempt
  double elapsed_s = 0;
  double wait_after_s = 0;   // back-off before the next attempt
};

struct CallRecord {
  double unix_time = 0;      // when the call started
  std::string provider, model, task, purpose;
  std::string request_hash;
  ChatRequest request;
  ChatResult result;         // status, error kind, reply, usage, cost, timing
  std::vector<AttemptLog> attempt_log;
};

// Record <-> one JSON line. FromJson fails with a reason on a bad record.
std::string RecordToJsonLine(const CallRecord& r);
Status RecordFromJsonLine(const std::string& line, CallRecord* out);

class CallSink {
 public:
  virtual ~CallSink() = default;
  // Thread-safe; called once per finished call.
  virtual void Write(const CallRecord& r) = 0;
};

class JsonlRecorder : public CallSink {
 public:
  // Opens (append or truncate) the file; fails with a reason.
  static Status Open(const std::string& path, bool append, std::unique_ptr<JsonlRecorder>* out);
  ~JsonlRecorder() override;
  void Write(const CallRecord& r) override;
  const std::string& path() const { return path_; }

 private:
  JsonlRecorder(std::string path, FILE* f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  FILE* f_;
  std::mutex mu_;
};

// Sends every record to each of several sinks (run store + --record file).
class TeeSink : public CallSink {
 public:
  explicit TeeSink(std::vector<std::shared_ptr<CallSink>> sinks) : sinks_(std::move(sinks)) {}
  void Write(const CallRecord& r) override {
    for (auto& s : sinks_)
      if (s) s->Write(r);
  }

 private:
  std::vector<std::shared_ptr<CallSink>> sinks_;
};

// Keeps records in memory (tests, reports).
class MemorySink : public CallSink {
 public:
  void Write(const CallRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(r);
  }
  std::vector<CallRecord> records() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<CallRecord> records_;
};

// Reads a JSONL recording; a bad line fails with its number.
Status ReadRecords(const std::string& path, std::vector<CallRecord>* out);

}  // namespace ax::llm
