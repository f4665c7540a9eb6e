#include "cli/worker_cmd.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <chrono>
#include <mutex>
#include <thread>

#include "broker/broker_status.h"
#include "broker/broker_url.h"
#include "broker/judge_service.h"
#include "broker/keys.h"
#include "broker/redis_cache.h"
#include "broker/redis_client.h"
#include "cli/cli_support.h"
#include "cli/interrupt.h"
#include "cli/judge_flags.h"
#include "judge/device_spec.h"
#include "judge/judge.h"

namespace ax::cli {

namespace {

std::string Clock() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::localtime(&t));
  return buf;
}

std::string DefaultName() {
  char host[128] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  std::string name = std::string(host) + "-" + std::to_string(getpid());
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  return name.substr(0, 100);
}

int ExitFor(const Status& s) {
  return s.code() == StatusCode::kInvalidInput ? kExitBadInput : kExitEnvironment;
}

}  // namespace

void RegisterWorkerCommands(CLI::App& app, WorkerFlags* f, CLI::App** worker, CLI::App** status) {
  CLI::App* w = app.add_subcommand("worker", "serve judge jobs from a Redis Streams broker until stopped");
  w->add_option("--broker", f->broker, "redis://[user:password@]HOST:PORT[/DB] (password also from ADAEXPLORE_BROKER_PASSWORD)")
      ->required();
  w->add_option("--device", f->device, "cpu, cuda:N, a list cuda:0,cuda:1, or all (default: all)");
  w->add_option("--name", f->name, "this worker's name (default: HOST-PID)");
  w->add_option("--jobs", f->jobs, "candidates judged at once per device (default 2)");
  w->add_option("--lease", f->lease_s, "seconds after which a silent worker's jobs are claimed by others (default 30)");
  w->add_option("--python", f->python, "Python interpreter with torch and triton");
  w->add_option("--cache-dir", f->cache_dir, "verdict, baseline and build caches (default: ~/.cache/adaexplore)");
  w->add_option("--max-memory-mb", f->max_memory_mb, "host memory limit per judge process (default: half the RAM)");
  *worker = w;
  CLI::App* s = app.add_subcommand("judge-status", "show a broker's workers, queues and jobs in flight");
  s->add_option("--broker", f->broker, "redis://[user:password@]HOST:PORT[/DB]")->required();
  s->add_flag("--json", f->json, "one JSON object");
  *status = s;
}

int RunWorkerCommand(const WorkerFlags& f) {
  broker::BrokerUrl url;
  if (Status s = broker::ParseBrokerUrlFromEnv(f.broker, &url); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  DeviceSpec spec;
  if (Status s = ParseDeviceSpec(f.device, VisibleGpuCount(), &spec); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  if (f.jobs < 1 || f.lease_s < 1) {
    Fail("--jobs and --lease must be at least 1");
    return kExitBadInput;
  }
  const std::string name = f.name.empty() ? DefaultName() : f.name;
  if (!broker::SafeName(name)) {
    Fail("bad --name '" + name + "' (letters, digits, - _ . and at most 100 of them)");
    return kExitBadInput;
  }
  {
    // The broker first: a wrong password is said before the judge starts.
    broker::RedisClient probe(url);
    if (Status s = probe.Connect(); !s.ok()) {
      Fail(s.message());
      return ExitFor(s);
    }
  }
  PoolConfig cfg = DefaultPoolConfig();
  if (!f.python.empty()) cfg.python = f.python;
  if (!f.cache_dir.empty()) cfg.cache_dir = std::filesystem::absolute(f.cache_dir).string();
  cfg.devices = spec.devices;
  cfg.workers_per_device = f.jobs;
  if (f.max_memory_mb > 0) cfg.limits.max_memory_bytes = f.max_memory_mb << 20;
  broker::Keys keys;
  cfg.shared_cache = std::make_shared<broker::RedisCache>(url, keys);
  std::unique_ptr<Judge> pool = MakeJudgePool(cfg);
  std::vector<std::string> names;
  if (Status s = pool->DeviceNames(&names); !s.ok()) {
    Fail(s.message());
    return kExitEnvironment;
  }
  for (const auto& n : names) {
    if (n != names[0]) {
      Fail("the devices are of different models (" + names[0] + ", " + n +
           "): start one worker per model, each with its --device list, so that timings stay comparable");
      return kExitBadInput;
    }
  }
  std::mutex log_mu;
  broker::ServiceConfig sc;
  sc.url = url;
  sc.keys = keys;
  sc.name = name;
  sc.model = broker::ModelSlug(names[0]);
  sc.device_request = spec.request_device();
  sc.devices = spec.devices;
  sc.device_names = names;
  sc.slots = f.jobs * static_cast<int>(spec.devices.size());
  sc.lease_s = f.lease_s;
  sc.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu);
    std::fprintf(stderr, "%s worker %s: %s\n", Clock().c_str(), name.c_str(), line.c_str());
  };
  std::string devices;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    devices += (i ? ", " : "") + spec.devices[i] + " (" + names[i] + ")";
  }
  sc.log("devices " + devices + "; model " + sc.model);
  InterruptScope interrupt_scope("adaexplore worker: stopping: finishing the jobs in hand (signal again to stop now)\n");
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop) {
      if (Interrupted()) stop = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  Status s = broker::RunJudgeService(sc, pool.get(), &stop);
  stop = true;
  watcher.join();
  if (!s.ok()) {
    Fail(s.message());
    return ExitFor(s);
  }
  return 0;
}

int RunJudgeStatusCommand(const WorkerFlags& f) {
  broker::BrokerUrl url;
  if (Status s = broker::ParseBrokerUrlFromEnv(f.broker, &url); !s.ok()) {
    Fail(s.message());
    return kExitBadInput;
  }
  nlohmann::json st;
  if (Status s = broker::GatherStatus(url, broker::Keys{}, &st); !s.ok()) {
    Fail(s.message());
    return ExitFor(s);
  }
  if (f.json) {
    std::cout << st.dump() << std::endl;
  } else {
    std::cout << broker::RenderStatus(st);
  }
  return 0;
}

}  // namespace ax::cli
