// bench_search: the search orchestrator's own cost and its concurrency, with a
// fake judge and a fake LLM client (tests/cpp/search/search_fakes.h for the
// verdict markers and the replies).
//
// Part 1, overhead: several tasks in parallel threads, each a TaskSearch
// (MCTS, the real LlmProposer, LlmCaller and prompts, a real RunStore in a
// temporary folder) whose fakes answer instantly. Prints wall and CPU time per
// step with the fakes' own time taken out, by tree size, with and without the
// run store.
//
// Part 2, concurrency: N tasks in parallel with a fake LLM latency (50 ms) and
// a fake judge latency (200 ms), answered from timer threads as the real
// clients do. Prints the average number of LLM calls and judge calls in
// flight, against N, and the wall time against the ideal (the longest task's
// summed fake latencies).
//
//   bench_search [--quick]
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "common/util.h"
#include "search/proposer.h"
#include "search/run_store.h"
#include "search/search.h"
#include "search_fakes.h"

#ifndef ADAEXPLORE_SOURCE_DIR
#define ADAEXPLORE_SOURCE_DIR "."
#endif

namespace {

using namespace ax;
using namespace ax::search;

double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double ProcessCpu() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

// Time spent inside the fakes, on the calling thread.
thread_local double tl_fake_wall = 0, tl_fake_cpu = 0;

struct FakeTimer {
  double w0 = NowSeconds(), c0 = ThreadCpu();
  ~FakeTimer() {
    tl_fake_wall += NowSeconds() - w0;
    tl_fake_cpu += ThreadCpu() - c0;
  }
};

// A time-weighted count of calls in flight.
class Gauge {
 public:
  void Reset() {
    std::lock_guard<std::mutex> l(mu_);
    n_ = 0;
    area_ = 0;
    max_ = 0;
    t0_ = last_ = NowSeconds();
  }
  void Add(int d) {
    std::lock_guard<std::mutex> l(mu_);
    double now = NowSeconds();
    area_ += n_ * (now - last_);
    last_ = now;
    n_ += d;
    max_ = std::max(max_, n_);
  }
  double Average() {
    std::lock_guard<std::mutex> l(mu_);
    double now = NowSeconds();
    return (area_ + n_ * (now - last_)) / std::max(1e-9, now - t0_);
  }
  int Max() {
    std::lock_guard<std::mutex> l(mu_);
    return max_;
  }

 private:
  std::mutex mu_;
  int n_ = 0, max_ = 0;
  double area_ = 0, t0_ = 0, last_ = 0;
};

// Runs callbacks at their deadlines on a few threads, like a client's event loop.
class Timers {
 public:
  explicit Timers(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~Timers() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Runs fn(lateness) at the deadline; lateness is how late it ran.
  void At(double deadline, std::function<void(double)> fn) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push({deadline, seq_++, std::move(fn)});
    }
    cv_.notify_one();
  }

 private:
  struct Item {
    double t;
    uint64_t seq;
    std::function<void(double)> fn;
    bool operator>(const Item& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      if (stop_ && q_.empty()) return;
      if (q_.empty()) {
        cv_.wait(l);
        continue;
      }
      double now = NowSeconds();
      if (q_.top().t > now) {
        cv_.wait_for(l, std::chrono::duration<double>(q_.top().t - now));
        continue;
      }
      Item it = q_.top();
      q_.pop();
      l.unlock();
      it.fn(now - it.t);
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Per task: how late the fakes' answers came (the timer threads' lag on a
// busy machine), so that it is not counted as the engine's time.
class Lateness {
 public:
  void Add(const std::string& task, double s) {
    std::lock_guard<std::mutex> l(mu_);
    by_task_[task] += s;
  }
  void Clear() {
    std::lock_guard<std::mutex> l(mu_);
    by_task_.clear();
  }
  double Of(const std::string& task) {
    std::lock_guard<std::mutex> l(mu_);
    return by_task_[task];
  }

 private:
  std::mutex mu_;
  std::map<std::string, double> by_task_;
};
Lateness g_lateness;

// The fake LLM: fakes::DefaultReply, at once or after `latency_s`.
class BenchLlm : public llm::LlmClient {
 public:
  BenchLlm(double latency_s, Timers* timers, Gauge* gauge) : latency_(latency_s), timers_(timers), gauge_(gauge) {}
  void ChatAsync(llm::ChatRequest req, llm::ChatCallback done) override {
    llm::ChatResult r;
    {
      FakeTimer ft;
      r.provider = "fake";
      r.model = "fake-1";
      r.reply.text = fakes::DefaultReply(req);
      r.usage.input_tokens = static_cast<int64_t>(req.messages.back().content.size() / 4);
      r.usage.output_tokens = static_cast<int64_t>(r.reply.text.size() / 4);
    }
    calls_++;
    if (latency_ <= 0) {
      done(std::move(r));
      return;
    }
    gauge_->Add(+1);
    timers_->At(NowSeconds() + latency_,
                [this, task = req.task, r = std::move(r), done = std::move(done)](double late) mutable {
                  gauge_->Add(-1);
                  g_lateness.Add(task, late);
                  done(std::move(r));
                });
  }
  std::string Describe() const override { return "fake:bench"; }
  std::atomic<int> calls_{0};

 private:
  double latency_;
  Timers* timers_;
  Gauge* gauge_;
};

class BenchJudge : public Judge {
 public:
  BenchJudge(double latency_s, Timers* timers, Gauge* gauge) : latency_(latency_s), timers_(timers), gauge_(gauge) {}
  std::future<EvalResult> Submit(EvalRequest req) override {
    auto p = std::make_shared<std::promise<EvalResult>>();
    auto f = p->get_future();
    EvalResult r;
    {
      FakeTimer ft;
      r = fakes::FakeVerdict(req.candidate_source, !req.options.use_cache);
    }
    calls_++;
    {
      std::lock_guard<std::mutex> l(mu_);
      per_task_[req.task.name]++;
    }
    if (latency_ <= 0) {
      p->set_value(std::move(r));
      return f;
    }
    gauge_->Add(+1);
    timers_->At(NowSeconds() + latency_, [this, p, task = req.task.name, r = std::move(r)](double late) mutable {
      gauge_->Add(-1);
      g_lateness.Add(task, late);
      p->set_value(std::move(r));
    });
    return f;
  }
  Status CheckTask(const TaskRef&, const JudgeOptions&, TaskInfo* info) override {
    info->ok = true;
    return Status::Ok();
  }
  std::atomic<int> calls_{0};
  int CallsFor(const std::string& task) {
    std::lock_guard<std::mutex> l(mu_);
    return per_task_[task];
  }

 private:
  double latency_;
  Timers* timers_;
  Gauge* gauge_;
  std::mutex mu_;
  std::map<std::string, int> per_task_;
};

struct TaskRun {
  TaskResult result;
  Status status;
  double wall = 0, cpu = 0, fake_wall = 0, fake_cpu = 0, late = 0;
  int llm_calls = 0, judge_calls = 0;
  // Per step (the tree has step + 1 nodes): engine wall and CPU time, fakes excluded.
  std::vector<double> step_wall, step_cpu;
};

struct Setup {
  int tasks = 4, steps = 500;
  bool store = true;
  double llm_latency = 0, judge_latency = 0;
  std::string method = "mcts";
};

struct Totals {
  std::vector<TaskRun> runs;
  double wall = 0, process_cpu = 0;
  double llm_avg = 0, judge_avg = 0;
  int llm_max = 0, judge_max = 0;
};

Totals RunTasks(const Setup& su, const Prompts& prompts, const std::string& dir) {
  Timers timers(4);
  Gauge llm_gauge, judge_gauge;
  BenchLlm client(su.llm_latency, &timers, &llm_gauge);
  BenchJudge judge(su.judge_latency, &timers, &judge_gauge);
  std::unique_ptr<RunStore> store;
  if (su.store) {
    Status s = RunStore::Open(dir + "/run.sqlite", &store);
    if (!s.ok()) {
      std::fprintf(stderr, "bench_search: %s\n", s.message().c_str());
      std::exit(1);
    }
  }
  Totals tot;
  tot.runs.resize(su.tasks);
  llm_gauge.Reset();
  judge_gauge.Reset();
  g_lateness.Clear();
  const double t0 = NowSeconds(), cpu0 = ProcessCpu();
  std::vector<std::thread> threads;
  for (int i = 0; i < su.tasks; ++i) {
    threads.emplace_back([&, i] {
      TaskRun& run = tot.runs[i];
      TaskRef task = fakes::MakeTask("task" + std::to_string(i));
      // Each task its own variant of the reference, so replies differ.
      task.source += "\n# variant " + std::to_string(i) + "\n";
      task.hash = Sha256Hex(task.source);
      SearchConfig cfg;
      cfg.method = su.method;
      cfg.steps = su.steps;
      cfg.seed = 1000 + i;
      LlmCaller caller(&client, store.get(), task.name, 4096);
      LlmProposer proposer(&prompts, &caller);
      tl_fake_wall = tl_fake_cpu = 0;
      double last_w = NowSeconds(), last_c = ThreadCpu(), last_fw = 0, last_fc = 0;
      auto progress = [&](const Progress&) {
        double w = NowSeconds(), c = ThreadCpu();
        run.step_wall.push_back((w - last_w) - (tl_fake_wall - last_fw));
        run.step_cpu.push_back((c - last_c) - (tl_fake_cpu - last_fc));
        last_w = w, last_c = c, last_fw = tl_fake_wall, last_fc = tl_fake_cpu;
      };
      TaskSearch search(task, &judge, JudgeOptions{}, &proposer, store.get(), cfg, progress, {});
      const double w0 = NowSeconds(), c0 = ThreadCpu();
      run.status = search.Run(dir + "/" + task.name, &run.result);
      run.wall = NowSeconds() - w0;
      run.cpu = ThreadCpu() - c0;
      run.fake_wall = tl_fake_wall;
      run.fake_cpu = tl_fake_cpu;
      run.llm_calls = caller.calls();
      run.judge_calls = judge.CallsFor(task.name);
      run.late = g_lateness.Of(task.name);
    });
  }
  for (auto& t : threads) t.join();
  tot.wall = NowSeconds() - t0;
  tot.process_cpu = ProcessCpu() - cpu0;
  tot.llm_avg = llm_gauge.Average();
  tot.judge_avg = judge_gauge.Average();
  tot.llm_max = llm_gauge.Max();
  tot.judge_max = judge_gauge.Max();
  for (auto& r : tot.runs) {
    if (!r.status.ok()) std::fprintf(stderr, "bench_search: a task failed: %s\n", r.status.message().c_str());
  }
  return tot;
}

void Overhead(const Prompts& prompts, const std::string& root, int tasks, int steps, bool store) {
  Setup su;
  su.tasks = tasks;
  su.steps = steps;
  su.store = store;
  std::string dir = MakeTempDir(root, store ? "store" : "nostore");
  Totals t = RunTasks(su, prompts, dir);
  double wall = 0, cpu = 0, fwall = 0, fcpu = 0;
  int done = 0, llm = 0;
  for (const auto& r : t.runs) {
    wall += r.wall;
    cpu += r.cpu;
    fwall += r.fake_wall;
    fcpu += r.fake_cpu;
    done += r.result.steps_done;
    llm += r.llm_calls;
  }
  std::printf("  %d task%s x %d steps, %s: %d steps, %d LLM calls, %.2f s wall, %.0f steps/s\n", tasks,
              tasks > 1 ? "s in parallel" : "", steps, store ? "with the run store" : "no run store", done, llm,
              t.wall, done / t.wall);
  std::printf("    engine per step: wall %.0f us, CPU %.0f us   (taken out, the fakes: wall %.0f us, CPU %.0f us)\n",
              1e6 * (wall - fwall) / done, 1e6 * (cpu - fcpu) / done, 1e6 * fwall / done, 1e6 * fcpu / done);
  // The engine's time per step over windows of steps, i.e. by tree size.
  const int window = std::max(1, steps / 5);
  std::printf("    by tree size, wall/CPU us per step:");
  for (int b = 0; b < steps; b += window) {
    double w = 0, c = 0;
    int n = 0;
    for (const auto& r : t.runs) {
      for (int s = b; s < std::min(steps, b + window) && s < static_cast<int>(r.step_wall.size()); ++s) {
        w += r.step_wall[s];
        c += r.step_cpu[s];
        ++n;
      }
    }
    if (n) std::printf("  %d-%d: %.0f/%.0f", b + 1, std::min(steps, b + window), 1e6 * w / n, 1e6 * c / n);
  }
  std::printf("\n");
  RemoveTree(dir);
}

void Concurrency(const Prompts& prompts, const std::string& root, int tasks, int steps, double llm_s, double judge_s,
                 bool store = true) {
  Setup su;
  su.store = store;
  su.tasks = tasks;
  su.steps = steps;
  su.llm_latency = llm_s;
  su.judge_latency = judge_s;
  std::string dir = MakeTempDir(root, "conc");
  Totals t = RunTasks(su, prompts, dir);
  // The ideal wall time: a task waits for its own calls one after another,
  // so the run cannot end before the task with the most waiting does.
  // Within a task, the time not spent waiting for a fake is the engine's
  // (and the timer threads' lateness): the gap per step.
  double ideal = 0, gap = 0, busy_task = 0, late = 0;
  int llm = 0, judge = 0, steps_done = 0;
  for (const auto& r : t.runs) {
    const double waits = r.llm_calls * llm_s + r.judge_calls * judge_s;
    ideal = std::max(ideal, waits);
    gap += r.wall - waits - r.late;
    late += r.late;
    busy_task += waits / r.wall;
    llm += r.llm_calls;
    judge += r.judge_calls;
    steps_done += r.result.steps_done;
  }
  const double busy = (t.llm_avg + t.judge_avg) / tasks;
  std::printf("  %3d tasks x %d steps, %s: %.2f s wall (ideal %.2f s: %.1f%%), %d LLM calls, %d judge calls\n",
              tasks, steps, store ? "with the run store" : "no run store", t.wall, ideal, 100 * ideal / t.wall, llm, judge);
  std::printf("    in flight on average: LLM %.2f (max %d), judge %.2f (max %d); together %.2f for %d tasks"
              " (%.1f%% of the time every task has a call out); process CPU %.2f s (%.1f%% of one core)\n",
              t.llm_avg, t.llm_max, t.judge_avg, t.judge_max, t.llm_avg + t.judge_avg, tasks, 100 * busy,
              t.process_cpu, 100 * t.process_cpu / t.wall);
  std::printf("    within a task: waiting on a fake %.1f%% of its run; the rest: the fakes' timers late by %.2f ms"
              " per step, the engine %.2f ms per step\n",
              100 * busy_task / tasks, 1e3 * late / steps_done, 1e3 * gap / steps_done);
  RemoveTree(dir);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Prompts prompts;
  if (Status s = Prompts::Load(std::string(ADAEXPLORE_SOURCE_DIR) + "/prompts", &prompts); !s.ok()) {
    std::fprintf(stderr, "bench_search: %s\n", s.message().c_str());
    return 1;
  }
  std::string root = MakeTempDir("/tmp", "bench_search");
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("bench_search: MCTS, real LlmProposer/LlmCaller/prompts, fake LLM and judge; %u cores\n", cores);

  std::printf("\n1. orchestrator overhead (fakes answer at once; their own time is taken out)\n");
  Overhead(prompts, root, 1, quick ? 200 : 2000, false);
  Overhead(prompts, root, 4, quick ? 100 : 500, false);
  Overhead(prompts, root, 1, quick ? 100 : 500, true);
  Overhead(prompts, root, 4, quick ? 50 : 150, true);

  std::printf("\n2. concurrency (fake LLM 50 ms per call, fake judge 200 ms per call)\n");
  for (int n : quick ? std::vector<int>{8} : std::vector<int>{4, 16, 64}) Concurrency(prompts, root, n, 8, 0.05, 0.2);
  Concurrency(prompts, root, quick ? 8 : 64, 8, 0.05, 0.2, false);
  RemoveTree(root);
  return 0;
}
