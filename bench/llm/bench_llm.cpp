// bench_llm: client overhead and throughput against a local OpenAI-style
// server. The server runs in a child process so that the CPU time measured
// here is the client's alone.
//
//   bench_llm [--calls N] [--concurrency K] [--server-delay-ms D]
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "common/util.h"
#include "fake_server.h"
#include "llm/factory.h"

using namespace ax;
using namespace ax::llm;

namespace {

double ProcessCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

int ThreadCount() {
  auto s = ReadFile("/proc/self/status");
  if (!s) return -1;
  size_t p = s->find("Threads:");
  return p == std::string::npos ? -1 : std::atoi(s->c_str() + p + 8);
}

struct RunFigures {
  double wall_s, cpu_s, loop_cpu_s;
  int failures;
  int max_threads;
};

RunFigures Run(LlmClient& c, HttpLoop& loop, int calls, int concurrency, const std::string& prompt) {
  RunFigures f{};
  double loop0 = loop.LoopCpuSeconds();
  double cpu0 = ProcessCpu();
  double t0 = NowSeconds();
  std::mutex mu;
  std::condition_variable cv;
  int started = 0, finished = 0, in_flight = 0;
  std::function<void()> launch;
  launch = [&] {
    ChatRequest r;
    r.messages.push_back({"user", prompt});
    r.max_tokens = 64;
    c.ChatAsync(std::move(r), [&](ChatResult res) {
      std::lock_guard<std::mutex> lock(mu);
      if (!res.ok()) f.failures++;
      finished++;
      in_flight--;
      cv.notify_one();
    });
  };
  std::unique_lock<std::mutex> lock(mu);
  while (finished < calls) {
    while (started < calls && in_flight < concurrency) {
      started++;
      in_flight++;
      lock.unlock();
      launch();
      lock.lock();
    }
    if (started % 64 == 0) {
      lock.unlock();
      int t = ThreadCount();
      lock.lock();
      f.max_threads = std::max(f.max_threads, t);
    }
    cv.wait(lock, [&] { return (started < calls && in_flight < concurrency) || finished >= calls; });
  }
  f.wall_s = NowSeconds() - t0;
  f.cpu_s = ProcessCpu() - cpu0;
  f.loop_cpu_s = loop.LoopCpuSeconds() - loop0;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 5000, concurrency = 64, delay_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--calls") calls = std::atoi(argv[i + 1]);
    else if (a == "--concurrency") concurrency = std::atoi(argv[i + 1]);
    else if (a == "--server-delay-ms") delay_ms = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bench_llm: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  int pipefd[2];
  if (pipe(pipefd) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    close(pipefd[0]);
    ax::llm::testing::FakeServer server(concurrency + 8);
    std::string reply = ax::llm::testing::OpenAiReply(std::string(400, 'x'));
    server.SetDefault([reply, delay_ms](const ax::llm::testing::Seen&) {
      ax::llm::testing::Action a = ax::llm::testing::Ok(reply);
      a.delay_s = delay_ms / 1000.0;
      return a;
    });
    int port = server.port();
    if (write(pipefd[1], &port, sizeof port) != sizeof port) _exit(1);
    close(pipefd[1]);
    pause();  // until the parent kills us
    _exit(0);
  }
  close(pipefd[1]);
  int port = 0;
  if (read(pipefd[0], &port, sizeof port) != sizeof port) {
    std::fprintf(stderr, "bench_llm: server did not start\n");
    return 1;
  }
  auto loop = std::make_shared<HttpLoop>();
  ClientConfig cfg;
  cfg.env = [](const std::string& n) -> std::optional<std::string> {
    if (n == "OPENAI_API_KEY") return std::string("sk-bench");
    return std::nullopt;
  };
  cfg.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  RunServices svc;
  svc.loop = loop;
  std::unique_ptr<LlmClient> client;
  Status s = MakeClient("openai:bench-model", cfg, svc, &client);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_llm: %s\n", s.message().c_str());
    return 1;
  }
  std::string prompt(4000, 'p');  // a realistic ~1k-token prompt
  Run(*client, *loop, 200, concurrency, prompt);  // warm up connections
  RunFigures seq = Run(*client, *loop, std::min(calls, 2000), 1, prompt);
  RunFigures par = Run(*client, *loop, calls, concurrency, prompt);
  int seq_calls = std::min(calls, 2000);
  std::printf("bench_llm: local OpenAI-style server, %d-byte prompt, reply 400 chars, server delay %d ms\n",
              int(prompt.size()), delay_ms);
  std::printf("sequential: %d calls, %.1f us wall/call, client CPU %.1f us/call (event loop %.1f us/call)\n",
              seq_calls, seq.wall_s / seq_calls * 1e6, seq.cpu_s / seq_calls * 1e6,
              seq.loop_cpu_s / seq_calls * 1e6);
  std::printf("concurrency %d: %d calls in %.2f s = %.0f calls/s, client CPU %.1f us/call "
              "(event loop %.1f us/call), failures %d, process threads %d\n",
              concurrency, calls, par.wall_s, calls / par.wall_s, par.cpu_s / calls * 1e6,
              par.loop_cpu_s / calls * 1e6, par.failures, par.max_threads);
  client.reset();
  loop.reset();
  kill(child, SIGTERM);
  waitpid(child, nullptr, 0);
  return seq.failures + par.failures > 0 ? 1 : 0;
}
