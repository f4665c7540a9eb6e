#include "llm/http_loop.h"

#include <curl/curl.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <unordered_set>

#include "common/util.h"

namespace ax::llm {

struct HttpLoop::Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  HttpRequest req;
  HttpResponse resp;
  HttpCallback done;
  double start = 0;
};

namespace {

std::once_flag g_curl_init;

bool timer_later(const auto& a, const auto& b) {
  return a.at != b.at ? a.at > b.at : a.seq > b.seq;
}

size_t WriteBody(char* data, size_t size, size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(data, size * n);
  return size * n;
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t ReadHeader(char* data, size_t size, size_t n, void* ud) {
  auto* resp = static_cast<HttpResponse*>(ud);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new header block (e.g. after 100)
    resp->retry_after_s = -1;
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = Lower(Trim(line.substr(0, colon)));
  std::string value = Trim(line.substr(colon + 1));
  if (name == "retry-after-ms") {
    char* end = nullptr;
    double ms = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && ms >= 0) resp->retry_after_s = ms / 1000.0;
  } else if (name == "retry-after") {
    if (resp->retry_after_s >= 0) return size * n;  // -ms form already seen
    char* end = nullptr;
    double s = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0' && s >= 0) {
      resp->retry_after_s = s;
    } else {
      time_t when = curl_getdate(value.c_str(), nullptr);
      if (when > 0) resp->retry_after_s = std::max(0.0, double(when - time(nullptr)));
    }
  } else if (name == "x-request-id" || name == "request-id" || name == "apim-request-id") {
    resp->request_id = value;
  }
  return size * n;
}

int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

HttpLoop::HttpLoop() {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  multi_ = curl_multi_init();
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, 256L);
  thread_ = std::thread([this] { Run(); });
}

HttpLoop::~HttpLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  curl_multi_wakeup(multi_);
  thread_.join();
  curl_multi_cleanup(multi_);
}

void HttpLoop::Submit(HttpRequest req, HttpCallback done) {
  auto t = std::make_unique<Transfer>();
  t->req = std::move(req);
  t->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      incoming_.push_back(std::move(t));
      in_flight_++;
    }
  }
  if (t) {  // refused: the loop is going away
    HttpResponse r;
    r.shut_down = true;
    r.transport_error = "client shut down";
    t->done(std::move(r));
    return;
  }
  curl_multi_wakeup(multi_);
}

void HttpLoop::After(double delay_s, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      timers_.push_back(Timer{NowSeconds() + std::max(0.0, delay_s), timer_seq_++, std::move(fn)});
      std::push_heap(timers_.begin(), timers_.end(), [](const Timer& a, const Timer& b) { return timer_later(a, b); });
      fn = nullptr;
    }
  }
  if (fn) {
    fn();
    return;
  }
  curl_multi_wakeup(multi_);
}

void HttpLoop::Start(std::unique_ptr<Transfer> owned) {
  Transfer* t = owned.release();
  t->start = NowSeconds();
  CURL* e = curl_easy_init();
  t->easy = e;
  for (const auto& h : t->req.headers) t->headers = curl_slist_append(t->headers, h.c_str());
  // Without this curl waits up to a second for "100 Continue" on big POSTs.
  t->headers = curl_slist_append(t->headers, "Expect:");
  curl_easy_setopt(e, CURLOPT_URL, t->req.url.c_str());
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t->resp.body);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, ReadHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t->resp);
  if (!t->req.body.empty()) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->req.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(t->req.body.size()));
  }
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, long(t->req.timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, long(t->req.connect_timeout_s * 1000));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_multi_add_handle(multi_, e);
}

void HttpLoop::Finish(Transfer* t, int code) {
  curl_multi_remove_handle(multi_, t->easy);
  HttpResponse& r = t->resp;
  r.elapsed_s = NowSeconds() - t->start;
  if (code == CURLE_OK) {
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.status);
  } else {
    r.status = 0;
    r.timed_out = code == CURLE_OPERATION_TIMEDOUT;
    r.transport_error = curl_easy_strerror(static_cast<CURLcode>(code));
  }
  curl_easy_cleanup(t->easy);
  curl_slist_free_all(t->headers);
  std::unique_ptr<Transfer> owned(t);
  in_flight_--;
  owned->done(std::move(owned->resp));
}

void HttpLoop::Run() {
  std::unordered_set<Transfer*> active;
  auto later = [](const Timer& a, const Timer& b) { return timer_later(a, b); };
  int64_t cpu0 = ThreadCpuNs();
  while (true) {
    std::vector<std::unique_ptr<Transfer>> batch;
    std::vector<std::function<void()>> due;
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop = stopping_;
      if (!stop) {
        batch.swap(incoming_);
        double now = NowSeconds();
        while (!timers_.empty() && timers_.front().at <= now) {
          std::pop_heap(timers_.begin(), timers_.end(), later);
          due.push_back(std::move(timers_.back().fn));
          timers_.pop_back();
        }
      }
    }
    if (stop) break;
    for (auto& fn : due) fn();
    for (auto& t : batch) {
      active.insert(t.get());
      Start(std::move(t));
    }
    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
      CURLcode code = m->data.result;
      active.erase(t);
      Finish(t, code);
    }
    int timeout_ms = 1000;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!incoming_.empty()) timeout_ms = 0;
      if (!timers_.empty()) {
        double wait = timers_.front().at - NowSeconds();
        timeout_ms = std::min(timeout_ms, std::max(0, int(wait * 1000 + 0.999)));
      }
    }
    cpu_ns_ = ThreadCpuNs() - cpu0;
    curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
  }
  // Shutting down: everything outstanding completes with an error.
  for (Transfer* t : active) {
    curl_multi_remove_handle(multi_, t->easy);
    curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    std::unique_ptr<Transfer> owned(t);
    HttpResponse r;
    r.shut_down = true;
    r.transport_error = "client shut down";
    in_flight_--;
    owned->done(std::move(r));
  }
  while (true) {
    std::vector<std::unique_ptr<Transfer>> batch;
    std::vector<Timer> timers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(incoming_);
      timers.swap(timers_);
    }
    if (batch.empty() && timers.empty()) break;
    for (auto& t : batch) {
      HttpResponse r;
      r.shut_down = true;
      r.transport_error = "client shut down";
      in_flight_--;
      t->done(std::move(r));
    }
    for (auto& tm : timers) tm.fn();
  }
}

}  // namespace ax::llm
