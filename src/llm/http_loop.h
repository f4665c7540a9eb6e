// HttpLoop: one thread running a libcurl multi handle that serves any number
// of concurrent HTTP requests, plus timers on the same thread (used for retry
// back-off and rate-limit waits). No thread per request: a waiting call costs
// a heap record, not a stack.
//
// Callbacks run on the loop thread and must not block. Destroying the loop
// completes every outstanding request with a "shut down" transport error and
// runs every pending timer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ax::llm {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // POSTed when non-empty, else GET
  double timeout_s = 600;            // whole transfer
  double connect_timeout_s = 15;
};

struct HttpResponse {
  long status = 0;             // HTTP status; 0 when no response came
  std::string body;
  double retry_after_s = -1;   // from retry-after-ms / Retry-After; -1 if none
  std::string request_id;      // x-request-id / request-id / apim-request-id
  std::string transport_error; // non-empty when the transfer failed
  bool timed_out = false;
  bool shut_down = false;
  double elapsed_s = 0;
};

using HttpCallback = std::function<void(HttpResponse)>;

class HttpLoop {
 public:
  HttpLoop();
  ~HttpLoop();
  HttpLoop(const HttpLoop&) = delete;
  HttpLoop& operator=(const HttpLoop&) = delete;

  // Thread-safe. The callback runs once, on the loop thread (or inline when
  // the loop is shutting down).
  void Submit(HttpRequest req, HttpCallback done);
  // Thread-safe. Runs fn on the loop thread after delay_s seconds.
  void After(double delay_s, std::function<void()> fn);

  bool stopping() const { return stopping_.load(); }
  // CPU time spent by the loop thread so far (for the overhead benchmark).
  double LoopCpuSeconds() const { return cpu_ns_.load() / 1e9; }
  size_t in_flight() const { return in_flight_.load(); }

 private:
  struct Transfer;
  struct Timer {
    double at;
    uint64_t seq;
    std::function<void()> fn;
  };
  void Run();
  void Start(std::unique_ptr<Transfer> t);
  void Finish(Transfer* t, int curl_code);

  void* multi_ = nullptr;  // CURLM*
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Transfer>> incoming_;
  std::vector<Timer> timers_;  // heap ordered by (at, seq)
  uint64_t timer_seq_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> cpu_ns_{0};
  std::atomic<size_t> in_flight_{0};
};

}  // namespace ax::llm
