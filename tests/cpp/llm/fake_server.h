// FakeServer: a real HTTP server on 127.0.0.1 (ephemeral port) for testing
// the LLM clients against each provider's wire format, with scripted faults:
// any status and headers, a hang before answering, a connection dropped in
// the middle of the reply.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ax::llm::testing {

struct Seen {
  std::string path;
  std::map<std::string, std::string> params;
  std::string body;
  std::multimap<std::string, std::string> headers;  // names lower-cased
  double at = 0;  // seconds since the server started
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

struct Action {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  double delay_s = 0;  // hang this long before answering
  bool drop = false;   // send half the body, then close the connection
};

class FakeServer {
 public:
  explicit FakeServer(int threads = 16) {
    start_ = std::chrono::steady_clock::now();
    svr_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr_.set_keep_alive_max_count(1000000);
    svr_.set_tcp_nodelay(true);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
    svr_.Post(".*", handler);
    svr_.Get(".*", handler);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    WidenBacklog(port_);
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    svr_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Scripted replies, used in order; after them, the default.
  void Push(Action a) {
    std::lock_guard<std::mutex> lock(mu_);
    script_.push_back(std::move(a));
  }
  void SetDefault(std::function<Action(const Seen&)> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    default_ = std::move(fn);
  }
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  size_t hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }
  int max_concurrent() const { return max_active_.load(); }

 private:
  // Debian's libcpp-httplib is built with a listen backlog of 5: a burst of
  // connections beyond it waits a second for SYN retransmission. Listening
  // again on the same socket widens the queue.
  static void WidenBacklog(int port) {
    for (int fd = 3; fd < 4096; fd++) {
      sockaddr_in a{};
      socklen_t len = sizeof a;
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET) continue;
      int acc = 0;
      socklen_t alen = sizeof acc;
      if (ntohs(a.sin_port) == port && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &alen) == 0 && acc)
        ::listen(fd, 1024);
    }
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    int now_active = ++active_;
    int prev = max_active_.load();
    while (now_active > prev && !max_active_.compare_exchange_weak(prev, now_active)) {
    }
    Seen s;
    s.path = req.path;
    for (const auto& [k, v] : req.params) s.params[k] = v;
    s.body = req.body;
    for (const auto& [k, v] : req.headers) {
      std::string name = k;
      for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      s.headers.emplace(name, v);
    }
    s.at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    Action a;
    {
      std::unique_lock<std::mutex> lock(mu_);
      seen_.push_back(s);
      if (!script_.empty()) {
        a = std::move(script_.front());
        script_.pop_front();
      } else if (default_) {
        auto fn = default_;
        lock.unlock();
        a = fn(s);
        lock.lock();
      } else {
        a.status = 500;
        a.body = R"({"error":{"message":"fake server has no reply scripted"}})";
      }
      if (a.delay_s > 0)
        cv_.wait_for(lock, std::chrono::duration<double>(a.delay_s), [this] { return stopped_; });
    }
    res.status = a.status;
    for (const auto& [k, v] : a.headers) res.set_header(k, v);
    if (a.drop) {
      auto body = std::make_shared<std::string>(a.body);
      res.set_content_provider(body->size(), "application/json",
                               [body](size_t off, size_t, httplib::DataSink& sink) {
                                 sink.write(body->data(), body->size() / 2);
                                 return false;  // abort: the connection closes
                               });
    } else {
      res.set_content(a.body, "application/json");
    }
    --active_;
  }

  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::deque<Action> script_;
  std::function<Action(const Seen&)> default_;
  std::vector<Seen> seen_;
  std::atomic<int> active_{0}, max_active_{0};
  std::chrono::steady_clock::time_point start_;
};

// Reply bodies in each provider's exact format.
inline std::string OpenAiReply(const std::string& text, const std::string& finish = "stop",
                               int prompt = 12, int completion = 34, int reasoning = -1,
                               int cached = -1, const std::string& model = "gpt-test-2025") {
  nlohmann::json u = {{"prompt_tokens", prompt}, {"completion_tokens", completion},
                      {"total_tokens", prompt + completion}};
  if (reasoning >= 0) u["completion_tokens_details"] = {{"reasoning_tokens", reasoning}};
  if (cached >= 0) u["prompt_tokens_details"] = {{"cached_tokens", cached}};
  nlohmann::json j = {
      {"id", "chatcmpl-123"},
      {"object", "chat.completion"},
      {"created", 1700000000},
      {"model", model},
      {"choices", {{{"index", 0},
                    {"message", {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}}},
                    {"finish_reason", finish}}}},
      {"usage", u}};
  return j.dump();
}

inline std::string AnthropicReply(const std::string& text, const std::string& stop = "end_turn",
                                  int in = 20, int out = 40, int cache_read = 0,
                                  const std::string& model = "claude-test-1") {
  nlohmann::json j = {
      {"id", "msg_01"},
      {"type", "message"},
      {"role", "assistant"},
      {"model", model},
      {"content", {{{"type", "thinking"}, {"thinking", "scratch work"}, {"signature", "sig"}},
                   {{"type", "text"}, {"text", text}}}},
      {"stop_reason", stop},
      {"stop_sequence", nullptr},
      {"usage", {{"input_tokens", in}, {"output_tokens", out}, {"cache_creation_input_tokens", 0},
                 {"cache_read_input_tokens", cache_read}}}};
  return j.dump();
}

inline Action Ok(std::string body) {
  Action a;
  a.body = std::move(body);
  return a;
}

inline Action HttpStatus(int status, std::string body,
                     std::vector<std::pair<std::string, std::string>> headers = {}) {
  Action a;
  a.status = status;
  a.body = std::move(body);
  a.headers = std::move(headers);
  return a;
}

}  // namespace ax::llm::testing
