// Worker: one Python worker process (docs/worker-protocol.md) in a sandbox,
// spoken to with one JSON request line in and one JSON reply line out.
//
// Every request has a wall-clock deadline; a worker that misses it, dies,
// floods its output or breaks the protocol is killed and the reply says so.
// What the worker prints on stdout/stderr is kept (capped) for error reports.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <string>

#include "judge/sandbox.h"

namespace ax {

struct WorkerConfig {
  std::string python = "python3";
  std::string worker_dir;                 // folder holding the adaexplore_worker package
  std::string role;                       // "reference" or "candidate"
  std::string device = "cpu";             // "cpu" or "cuda:N"
  std::string scratch;                    // working directory (created by the caller)
  std::string cache_dir;                  // persistent build caches (Triton, CUDA extensions)
  std::string extensions_dir;             // TORCH_EXTENSIONS_DIR; empty: cache_dir/torch_extensions
  SandboxLimits limits;
  size_t output_keep_bytes = 64 << 10;    // tail of stdout+stderr kept for reports
  size_t output_flood_bytes = 32 << 20;   // more than this and the worker is killed
  int threads = 4;
};

struct Reply {
  enum Kind { kOk, kTimeout, kDied, kFlood, kProtocol };
  Kind kind = kOk;
  nlohmann::json body;     // the reply object when kind == kOk
  std::string detail;      // how it died, what was malformed
  double seconds = 0;      // wall time of the request, on the parent's clock
  double build_seconds = 0;  // of which inside builds the worker reported (build events)
};

// A request's deadlines. By default one: `call_s` for everything. With
// `build_s` > 0 the worker's build events (docs/worker-protocol.md) split
// the time: the builds together get build_s, the rest call_s.
struct Deadlines {
  double call_s = 0;
  double build_s = 0;
};

class Worker {
 public:
  // Starts the process; it imports torch (and Triton) and then says ready.
  static std::unique_ptr<Worker> Start(const WorkerConfig& cfg, std::string* error);
  ~Worker();

  // Waits for the "ready" line (the warm-up imports) for at most timeout_s.
  // When *cancel becomes true meanwhile, the worker is killed and the reply
  // is kDied ("stopped while starting") within about 0.1 s.
  Reply WaitReady(double timeout_s, const std::atomic<bool>* cancel = nullptr);
  Reply Request(const nlohmann::json& req, double timeout_s) { return Request(req, Deadlines{timeout_s, 0}); }
  Reply Request(const nlohmann::json& req, const Deadlines& deadlines);

  // The descriptor channel (docs/worker-protocol.md): one descriptor per
  // message. RecvFd returns -1 (and says why) when none arrives in time;
  // DrainFds closes whatever is pending and returns how many there were.
  bool SendFd(int fd, std::string* error);
  int RecvFd(double timeout_s, std::string* error);
  int DrainFds();

  void Kill();
  bool alive() const { return alive_; }
  const std::string& isolation() const { return proc_->isolation(); }
  // The last bytes the worker printed (stdout and stderr interleaved).
  std::string OutputTail() const;
  size_t output_bytes() const { return output_total_; }
  const WorkerConfig& config() const { return cfg_; }

 private:
  Worker() = default;
  Reply ReadLine(const Deadlines& d, const std::atomic<bool>* cancel = nullptr);
  void Absorb(const char* data, size_t n);

  WorkerConfig cfg_;
  std::unique_ptr<SandboxProcess> proc_;
  std::string proto_buf_;
  std::string output_;      // ring-ish tail buffer
  size_t output_total_ = 0;
  bool alive_ = true;
};

// The environment a worker runs with: a small allow-list of the parent's
// variables plus the worker's own settings (no API keys, no proxies).
std::map<std::string, std::string> WorkerEnvironment(const WorkerConfig& cfg);

}  // namespace ax
