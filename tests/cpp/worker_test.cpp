#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "common/util.h"
#include "judge/judge.h"
#include "judge/worker.h"

namespace ax {
namespace {

namespace fs = std::filesystem;

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool Contains(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }

// Restores an environment variable when it goes out of scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// The real interpreter behind "python3" (pyenv and the like put shell-script
// shims on PATH), or "" when there is none.
const std::string& FindPython() {
  static const std::string found = [] {
    std::vector<std::string> cands = {ResolveOnPath("python3"), "/usr/bin/python3", "/usr/local/bin/python3"};
    for (const auto& c : cands) {
      if (c.empty() || c[0] != '/' || access(c.c_str(), X_OK) != 0) continue;
      char magic[2] = {0, 0};
      if (FILE* f = fopen(c.c_str(), "rb")) {
        size_t got = fread(magic, 1, 2, f);
        fclose(f);
        if (got == 2 && !(magic[0] == '#' && magic[1] == '!')) return c;  // a binary, not a shim script
      }
      std::string cmd = "'" + c + "' -s -c 'import sys; print(sys.executable)' 2>/dev/null";
      FILE* f = popen(cmd.c_str(), "r");
      if (!f) continue;
      char buf[4096] = {0};
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      int rc = pclose(f);
      std::string exe = Trim(std::string(buf, n));
      if (rc == 0 && !exe.empty() && exe[0] == '/' && access(exe.c_str(), X_OK) == 0) return exe;
    }
    return std::string();
  }();
  return found;
}

// A stand-in for the real worker: the same command line and descriptors, no
// torch; each request's "op" picks a behaviour.
const char* kFakeWorker = R"PY(
import json
import os
import sys
import time


def main():
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    proto = os.fdopen(int(os.environ.get("ADAEXPLORE_PROTO_FD", "3")), "w", buffering=1)
    if role == "no-ready":
        time.sleep(1000)
    if role == "bad-ready":
        proto.write(json.dumps({"ok": False, "error": "cannot import torch"}) + "\n")
        time.sleep(1000)
    if role == "die-at-start":
        sys.stderr.write("fatal: boom at start\n")
        sys.stderr.flush()
        os._exit(5)
    proto.write(json.dumps({"ok": True, "ready": role}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "echo":
            reply = {"ok": True, "echo": req, "role": role}
        elif op == "env":
            reply = {"ok": True, "env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv, "flags": {
                "no_user_site": sys.flags.no_user_site}}
        elif op == "print":
            sys.stdout.write(req.get("out", ""))
            sys.stdout.flush()
            sys.stderr.write(req.get("err", ""))
            sys.stderr.flush()
            reply = {"ok": True}
        elif op == "sleep":
            time.sleep(1000)
            reply = {"ok": True}
        elif op == "flood":
            chunk = "x" * (1 << 20)
            for _ in range(req.get("mb", 100)):
                sys.stdout.write(chunk)
                sys.stdout.flush()
            reply = {"ok": True, "flooded": True}
        elif op == "exit":
            sys.stderr.write(req.get("err", ""))
            sys.stderr.flush()
            os._exit(req["code"])
        elif op == "garbage":
            proto.write("this is not json\n")
            continue
        elif op == "not_object":
            proto.write("[1, 2, 3]\n")
            continue
        elif op == "partial":
            proto.write('{"ok": tr')
            proto.flush()
            time.sleep(1000)
        elif op == "segv":
            sys.stderr.write("about to crash\n")
            sys.stderr.flush()
            import ctypes
            ctypes.string_at(0)
        elif op == "orphan_exit":
            # A grandchild keeps every descriptor (the protocol one too) open.
            if os.fork() == 0:
                time.sleep(1000)
                os._exit(0)
            os._exit(4)
        elif op == "build":
            # Build events around a build of `build_s`, then a call of `call_s`.
            proto.write(json.dumps({"event": "build", "state": "start"}) + "\n")
            proto.flush()
            time.sleep(req["build_s"])
            proto.write(json.dumps({"event": "build", "state": "end"}) + "\n")
            proto.flush()
            time.sleep(req["call_s"])
            reply = {"ok": True, "built": True}
        elif op == "big_reply":
            reply = {"ok": True, "data": "y" * req["n"]}
        else:
            reply = {"ok": False, "error": "unknown op %r" % op}
        proto.write(json.dumps(reply) + "\n")
    return 0


sys.exit(main())
)PY";

class WorkerTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindPython().empty()) GTEST_SKIP() << "no python3 here";
    dir_ = MakeTempDir(::testing::TempDir(), "ax_worker_test_");
    ASSERT_FALSE(dir_.empty());
    dir_ = fs::path(dir_).lexically_normal().string();
    fs::create_directories(dir_ + "/pkg/adaexplore_worker");
    ASSERT_TRUE(WriteFile(dir_ + "/pkg/adaexplore_worker/__init__.py", ""));
    ASSERT_TRUE(WriteFile(dir_ + "/pkg/adaexplore_worker/__main__.py", kFakeWorker));
    fs::create_directories(dir_ + "/scratch");
    fs::create_directories(dir_ + "/cache");
  }
  void TearDown() override {
    if (!dir_.empty()) RemoveTree(dir_);
  }

  WorkerConfig Config(bool namespaces, const std::string& role = "candidate") const {
    WorkerConfig c;
    c.python = FindPython();
    c.worker_dir = dir_ + "/pkg";
    c.role = role;
    c.device = "cpu";
    c.scratch = dir_ + "/scratch";
    c.cache_dir = dir_ + "/cache";
    c.limits.namespaces = namespaces;
    c.threads = 2;
    return c;
  }

  std::unique_ptr<Worker> StartReady(const WorkerConfig& c) {
    std::string err;
    auto w = Worker::Start(c, &err);
    EXPECT_TRUE(w) << err;
    if (!w) return nullptr;
    Reply r = w->WaitReady(30);
    EXPECT_EQ(r.kind, Reply::kOk) << r.detail << "\n" << w->OutputTail();
    if (r.kind != Reply::kOk) return nullptr;
    EXPECT_EQ(r.body.value("ready", ""), c.role);
    return w;
  }

  // A judge pool on the CPU whose workers come from worker_dir.
  PoolConfig PoolOn(const std::string& worker_dir, int workers) const {
    PoolConfig pc;
    pc.python = FindPython();
    pc.worker_dir = worker_dir;
    pc.cache_dir = dir_ + "/cache";
    pc.scratch_root = dir_ + "/scratch/pool";
    pc.devices = {"cpu"};
    pc.workers_per_device = workers;
    pc.worker_start_timeout_s = 60;
    return pc;
  }

  std::string dir_;
};

class WorkerTest : public WorkerTestBase, public ::testing::WithParamInterface<bool> {
 protected:
  bool ns() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Modes, WorkerTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "Namespaces" : "ProcessGroup");
                         });

// ------------------------------------------------------------------ WorkerEnvironment

TEST(WorkerEnvironmentTest, CpuSettings) {
  WorkerConfig c;
  c.worker_dir = "/w";
  c.scratch = "/s";
  c.cache_dir = "/c";
  c.threads = 3;
  auto env = WorkerEnvironment(c);
  EXPECT_EQ(env["TRITON_INTERPRET"], "1");
  ASSERT_TRUE(env.count("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["PYTHONPATH"], "/w");
  EXPECT_EQ(env["HOME"], "/s");
  EXPECT_EQ(env["TMPDIR"], "/s");
  EXPECT_EQ(env["XDG_CACHE_HOME"], "/s/.cache");
  EXPECT_EQ(env["PYTHONDONTWRITEBYTECODE"], "1");
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
  EXPECT_EQ(env["PYTHONHASHSEED"], "0");
  EXPECT_EQ(env["ADAEXPLORE_PROTO_FD"], "3");
  EXPECT_EQ(env["ADAEXPLORE_THREADS"], "3");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "3");
  EXPECT_EQ(env["TRITON_CACHE_DIR"], "/c/triton");
  EXPECT_EQ(env["TORCHINDUCTOR_CACHE_DIR"], "/c/inductor");
  EXPECT_EQ(env["TORCH_EXTENSIONS_DIR"], "/c/torch_extensions");
  c.extensions_dir = "/ext";
  EXPECT_EQ(WorkerEnvironment(c)["TORCH_EXTENSIONS_DIR"], "/ext");
}

TEST(WorkerEnvironmentTest, CudaDeviceSelection) {
  WorkerConfig c;
  {
    ScopedEnv vis("CUDA_VISIBLE_DEVICES", nullptr);
    c.device = "cuda:0";
    auto env = WorkerEnvironment(c);
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
    EXPECT_FALSE(env.count("TRITON_INTERPRET"));
    c.device = "cuda:3";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "3");
    c.device = "cuda";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "0");
    c.device = "cuda:12";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "12");
  }
  {
    ScopedEnv vis("CUDA_VISIBLE_DEVICES", "");  // empty: as if unset
    c.device = "cuda:1";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "1");
  }
  {
    // Mapped through the parent's own visible list.
    ScopedEnv vis("CUDA_VISIBLE_DEVICES", "4,5,6");
    c.device = "cuda:0";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "4");
    c.device = "cuda:1";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "5");
    c.device = "cuda:2";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "6");
    c.device = "cpu";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "");
  }
  {
    ScopedEnv vis("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb");
    c.device = "cuda:1";
    EXPECT_EQ(WorkerEnvironment(c)["CUDA_VISIBLE_DEVICES"], "GPU-bbbb");
  }
}

TEST(WorkerEnvironmentTest, OnlyAllowListedParentVariables) {
  ScopedEnv a("OPENAI_API_KEY", "sk-secret");
  ScopedEnv b("ANTHROPIC_API_KEY", "sk-ant-secret");
  ScopedEnv c("HTTP_PROXY", "http://proxy:3128");
  ScopedEnv d("https_proxy", "http://proxy:3128");
  ScopedEnv e("AWS_SECRET_ACCESS_KEY", "aws");
  ScopedEnv f("LD_PRELOAD", "/evil.so");
  ScopedEnv g("PYTHONSTARTUP", "/evil.py");
  ScopedEnv h("LANG", "C.UTF-8");
  ScopedEnv i("MAX_JOBS", "7");
  ScopedEnv j("PYTHONPATH", "/parent/path");
  ScopedEnv k("HOME", "/root-home");
  WorkerConfig cfg;
  cfg.worker_dir = "/w";
  cfg.scratch = "/s";
  auto env = WorkerEnvironment(cfg);
  for (const char* bad : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HTTP_PROXY", "https_proxy", "AWS_SECRET_ACCESS_KEY",
                          "LD_PRELOAD", "PYTHONSTARTUP"}) {
    EXPECT_FALSE(env.count(bad)) << bad;
  }
  EXPECT_EQ(env["LANG"], "C.UTF-8");
  EXPECT_EQ(env["MAX_JOBS"], "7");
  EXPECT_EQ(env["PYTHONPATH"], "/w");  // the worker's, not the parent's
  EXPECT_EQ(env["HOME"], "/s");
  const std::set<std::string> allowed = {
      // passed through from the parent when set
      "PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "NVIDIA_VISIBLE_DEVICES",
      "NVIDIA_DRIVER_CAPABILITIES", "CC", "CXX", "TORCH_CUDA_ARCH_LIST", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
      "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "VIRTUAL_ENV",
      "TRITON_PTXAS_PATH", "MAX_JOBS",
      // the worker's own
      "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "HOME", "TMPDIR",
      "ADAEXPLORE_PROTO_FD", "ADAEXPLORE_CHANNEL_FD", "ADAEXPLORE_THREADS", "OMP_NUM_THREADS", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
      "TORCH_EXTENSIONS_DIR", "XDG_CACHE_HOME", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES"};
  for (auto& [key, value] : env) EXPECT_TRUE(allowed.count(key)) << "unexpected variable " << key;
}

TEST(WorkerEnvironmentTest, DefaultPath) {
  ScopedEnv path("PATH", nullptr);
  WorkerConfig cfg;
  EXPECT_EQ(WorkerEnvironment(cfg)["PATH"], "/usr/local/bin:/usr/bin:/bin");
}

// ------------------------------------------------------------------ a live worker

TEST_F(WorkerTestBase, StartFailsForMissingInterpreter) {
  WorkerConfig c = Config(false);
  c.python = dir_ + "/no/such/python3";
  std::string err;
  auto w = Worker::Start(c, &err);
  EXPECT_EQ(w, nullptr);
  EXPECT_TRUE(StartsWith(err, "cannot execute")) << err;
}

TEST_P(WorkerTest, ReadyAndEcho) {
  WorkerConfig c = Config(ns());
  auto w = StartReady(c);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->alive());
  EXPECT_FALSE(w->isolation().empty());
  EXPECT_EQ(w->config().role, "candidate");
  for (int i = 0; i < 20; ++i) {
    nlohmann::json req = {{"op", "echo"}, {"i", i}, {"payload", {{"nested", {1, 2, 3}}, {"s", "é\n\"x\""}}}};
    Reply r = w->Request(req, 20);
    ASSERT_EQ(r.kind, Reply::kOk) << r.detail << "\n" << w->OutputTail();
    EXPECT_EQ(r.body["echo"], req);
    EXPECT_EQ(r.body["role"], "candidate");
    EXPECT_GE(r.seconds, 0);
    EXPECT_LT(r.seconds, 20);
  }
  EXPECT_TRUE(w->alive());
}

TEST_P(WorkerTest, RoleIsPassedOnTheCommandLine) {
  auto w = StartReady(Config(ns(), "reference"));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "env"}}, 20);
  ASSERT_EQ(r.kind, Reply::kOk) << r.detail;
  EXPECT_EQ(r.body["argv"].back(), "reference");
  EXPECT_EQ(r.body["flags"]["no_user_site"], 1);  // "-s"
}

TEST_P(WorkerTest, EnvironmentReachingTheWorker) {
  ScopedEnv a("OPENAI_API_KEY", "sk-secret-test-value");
  ScopedEnv b("HTTPS_PROXY", "http://proxy.invalid:3128");
  ScopedEnv p("PYTHONPATH", "/parent/python/path");
  ScopedEnv v("CUDA_VISIBLE_DEVICES", "0,1");
  WorkerConfig c = Config(ns());
  auto w = StartReady(c);
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "env"}}, 20);
  ASSERT_EQ(r.kind, Reply::kOk) << r.detail;
  const auto& env = r.body["env"];
  EXPECT_FALSE(env.contains("OPENAI_API_KEY"));
  EXPECT_FALSE(env.contains("HTTPS_PROXY"));
  EXPECT_EQ(env.value("PYTHONPATH", ""), c.worker_dir);
  EXPECT_EQ(env.value("TRITON_INTERPRET", ""), "1");
  EXPECT_EQ(env.value("CUDA_VISIBLE_DEVICES", "missing"), "");
  EXPECT_EQ(env.value("HOME", ""), c.scratch);
  EXPECT_EQ(env.value("TMPDIR", ""), c.scratch);
  EXPECT_EQ(env.value("ADAEXPLORE_PROTO_FD", ""), "3");
  EXPECT_EQ(env.value("OMP_NUM_THREADS", ""), "2");
  EXPECT_EQ(r.body["cwd"], fs::canonical(c.scratch).string());
  // Exactly what WorkerEnvironment says, plus what Python itself may add.
  auto expected = WorkerEnvironment(c);
  for (auto& [k, val] : env.items()) {
    if (k == "LC_CTYPE") continue;  // PEP 538 locale coercion
    EXPECT_TRUE(expected.count(k)) << "unexpected variable in the worker: " << k;
  }
  for (auto& [k, val] : expected) EXPECT_EQ(env.value(k, "<missing>"), val) << k;
}

TEST_P(WorkerTest, OutputIsCaptured) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "print"}, {"out", "hello stdout\n"}, {"err", "hello stderr\n"}}, 20);
  ASSERT_EQ(r.kind, Reply::kOk) << r.detail;
  // stdout and stderr may arrive in either order; both are kept.
  std::string tail = w->OutputTail();
  EXPECT_TRUE(Contains(tail, "hello stdout\n")) << tail;
  EXPECT_TRUE(Contains(tail, "hello stderr\n")) << tail;
  EXPECT_EQ(w->output_bytes(), 26u);
}

TEST_P(WorkerTest, OutputTailIsCapped) {
  WorkerConfig c = Config(ns());
  c.output_keep_bytes = 1000;
  auto w = StartReady(c);
  ASSERT_TRUE(w);
  std::string big(10000, 'a');
  for (int i = 0; i < 3; ++i) {
    Reply r = w->Request({{"op", "print"}, {"err", big + "END-MARKER-" + std::to_string(i)}}, 20);
    ASSERT_EQ(r.kind, Reply::kOk) << r.detail;
    std::string tail = w->OutputTail();
    EXPECT_LE(tail.size(), 1000u);
    EXPECT_TRUE(tail.size() >= 1000u - 20u) << tail.size();
    std::string marker = "END-MARKER-" + std::to_string(i);
    EXPECT_EQ(tail.substr(tail.size() - marker.size()), marker);
  }
  EXPECT_EQ(w->output_bytes(), 3 * (10000u + 12u));
}

TEST_P(WorkerTest, LargeReplyIsAssembled) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  const int n = 5 << 20;
  Reply r = w->Request({{"op", "big_reply"}, {"n", n}}, 30);
  ASSERT_EQ(r.kind, Reply::kOk) << r.detail;
  EXPECT_EQ(r.body["data"].get<std::string>().size(), static_cast<size_t>(n));
  // And the conversation goes on.
  Reply e = w->Request({{"op", "echo"}}, 20);
  EXPECT_EQ(e.kind, Reply::kOk) << e.detail;
}

TEST_P(WorkerTest, TimeoutKillsTheWorker) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  double t0 = NowSeconds();
  Reply r = w->Request({{"op", "sleep"}}, 1.0);
  double took = NowSeconds() - t0;
  EXPECT_EQ(r.kind, Reply::kTimeout);
  EXPECT_EQ(r.detail, "no reply within 1 s");
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(took, 4.0);
  EXPECT_FALSE(w->alive());
  Reply again = w->Request({{"op", "echo"}}, 5);
  EXPECT_EQ(again.kind, Reply::kDied);
  EXPECT_EQ(again.detail, "worker is not running");
}

// Build events split a request's time: the builds get their own budget, the
// call the rest, and neither event line is taken for the reply.
TEST_P(WorkerTest, BuildEventsSplitTheDeadline) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  // A 1.5 s build and a 0.2 s call fit {call 1 s, builds 5 s}, though the
  // request takes longer than the call's second.
  Reply r = w->Request({{"op", "build"}, {"build_s", 1.5}, {"call_s", 0.2}}, Deadlines{1.0, 5.0});
  ASSERT_EQ(r.kind, Reply::kOk) << r.detail;
  EXPECT_TRUE(r.body.value("built", false));
  EXPECT_GE(r.build_seconds, 1.4);
  EXPECT_LT(r.build_seconds, 3.0);
  // The same call past its second is a timeout that says the call ran too long.
  Reply slow = w->Request({{"op", "build"}, {"build_s", 0.2}, {"call_s", 100}}, Deadlines{1.0, 5.0});
  EXPECT_EQ(slow.kind, Reply::kTimeout);
  EXPECT_TRUE(StartsWith(slow.detail, "the call ran longer than 1 s")) << slow.detail;
  EXPECT_LT(slow.seconds, 3.0);
}

TEST_P(WorkerTest, BuildsHaveTheirOwnBudget) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "build"}, {"build_s", 100}, {"call_s", 0}}, Deadlines{30.0, 1.0});
  EXPECT_EQ(r.kind, Reply::kTimeout);
  EXPECT_EQ(r.detail, "its builds ran longer than 1 s");
  EXPECT_LT(r.seconds, 3.0);
}

// Without a build budget the events change nothing: one deadline for all.
TEST_P(WorkerTest, OneDeadlineIgnoresBuildEvents) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "build"}, {"build_s", 100}, {"call_s", 0}}, 1.0);
  EXPECT_EQ(r.kind, Reply::kTimeout);
  EXPECT_EQ(r.detail, "no reply within 1 s");
}

TEST_P(WorkerTest, PartialReplyTimesOut) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "partial"}}, 0.5);
  EXPECT_EQ(r.kind, Reply::kTimeout) << r.detail;
  EXPECT_TRUE(StartsWith(r.detail, "no reply within")) << r.detail;
  EXPECT_GE(r.seconds, 0.45);
  EXPECT_FALSE(w->alive());
}

TEST_P(WorkerTest, FloodIsDetected) {
  auto w = StartReady(Config(ns()));  // default: 32 MiB
  ASSERT_TRUE(w);
  double t0 = NowSeconds();
  Reply r = w->Request({{"op", "flood"}, {"mb", 100}}, 60);
  EXPECT_EQ(r.kind, Reply::kFlood) << r.detail;
  EXPECT_EQ(r.detail, "printed more than 32 MiB of output");
  EXPECT_LT(NowSeconds() - t0, 20.0);
  EXPECT_GT(w->output_bytes(), 32u << 20);
  EXPECT_LT(w->output_bytes(), 100u << 20);
  EXPECT_LE(w->OutputTail().size(), w->config().output_keep_bytes);
  EXPECT_FALSE(w->alive());
}

TEST_P(WorkerTest, FloodLimitIsConfigurable) {
  WorkerConfig c = Config(ns());
  c.output_flood_bytes = 1 << 20;
  auto w = StartReady(c);
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "flood"}, {"mb", 100}}, 60);
  EXPECT_EQ(r.kind, Reply::kFlood) << r.detail;
  EXPECT_EQ(r.detail, "printed more than 1 MiB of output");
  EXPECT_FALSE(w->alive());
}

TEST_P(WorkerTest, ExitIsReportedAsDied) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "exit"}, {"code", 3}, {"err", "bye from worker\n"}}, 20);
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_EQ(r.detail, "exited with code 3");
  EXPECT_LT(r.seconds, 10);
  EXPECT_TRUE(Contains(w->OutputTail(), "bye from worker")) << w->OutputTail();
  EXPECT_FALSE(w->alive());
  Reply again = w->Request({{"op", "echo"}}, 5);
  EXPECT_EQ(again.kind, Reply::kDied);
}

TEST_P(WorkerTest, CleanExitIsStillDied) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "exit"}, {"code", 0}}, 20);
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_EQ(r.detail, "exited with code 0");
}

TEST_P(WorkerTest, SegfaultIsReportedAsDied) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "segv"}}, 20);
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_TRUE(Contains(r.detail, "signal 11")) << r.detail;
  EXPECT_EQ(r.detail, "killed by signal 11 (Segmentation fault)");
  EXPECT_TRUE(Contains(w->OutputTail(), "about to crash")) << w->OutputTail();
  EXPECT_FALSE(w->alive());
}

TEST_P(WorkerTest, MalformedReplyIsProtocolError) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "garbage"}}, 20);
  EXPECT_EQ(r.kind, Reply::kProtocol);
  EXPECT_EQ(r.detail, "worker sent a malformed reply: this is not json");
  EXPECT_FALSE(w->alive());
  Reply again = w->Request({{"op", "echo"}}, 5);
  EXPECT_EQ(again.kind, Reply::kDied);
}

TEST_P(WorkerTest, NonObjectReplyIsProtocolError) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  Reply r = w->Request({{"op", "not_object"}}, 20);
  EXPECT_EQ(r.kind, Reply::kProtocol);
  EXPECT_EQ(r.detail, "worker sent a malformed reply: [1, 2, 3]");
  EXPECT_FALSE(w->alive());
}

TEST_P(WorkerTest, BadReadyLine) {
  std::string err;
  auto w = Worker::Start(Config(ns(), "bad-ready"), &err);
  ASSERT_TRUE(w) << err;
  Reply r = w->WaitReady(20);
  EXPECT_EQ(r.kind, Reply::kProtocol);
  EXPECT_TRUE(StartsWith(r.detail, "worker did not start: ")) << r.detail;
  EXPECT_TRUE(Contains(r.detail, "cannot import torch")) << r.detail;
}

TEST_P(WorkerTest, NoReadyLineTimesOut) {
  std::string err;
  auto w = Worker::Start(Config(ns(), "no-ready"), &err);
  ASSERT_TRUE(w) << err;
  double t0 = NowSeconds();
  Reply r = w->WaitReady(0.5);
  EXPECT_EQ(r.kind, Reply::kTimeout);
  EXPECT_LT(NowSeconds() - t0, 4.0);
  EXPECT_FALSE(w->alive());
}

TEST_P(WorkerTest, WaitReadyStopsWhenCancelled) {
  std::string err;
  auto w = Worker::Start(Config(ns(), "no-ready"), &err);
  ASSERT_TRUE(w) << err;
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  double t0 = NowSeconds();
  Reply r = w->WaitReady(60, &cancel);
  double took = NowSeconds() - t0;
  stopper.join();
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_EQ(r.detail, "stopped while starting");
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 3.0);
  EXPECT_FALSE(w->alive());
}

// A judge pool starts its candidate workers in the background as soon as it
// exists. One destroyed before they are ready (a resumed bench with nothing
// left to run) kills them instead of waiting for their warm-up.
TEST_F(WorkerTestBase, PoolDestroyedWhileItsWorkersStartReturnsAtOnce) {
  fs::create_directories(dir_ + "/slow/adaexplore_worker");
  ASSERT_TRUE(WriteFile(dir_ + "/slow/adaexplore_worker/__init__.py", ""));
  ASSERT_TRUE(WriteFile(dir_ + "/slow/adaexplore_worker/__main__.py", "import time\ntime.sleep(1000)\n"));
  auto pool = MakeJudgePool(PoolOn(dir_ + "/slow", 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double t0 = NowSeconds();
  pool.reset();
  EXPECT_LT(NowSeconds() - t0, 5.0);
}

// Created and destroyed at once, over and over: every thread of the pool
// sees the stop, whatever point of its wait it had reached.
TEST_F(WorkerTestBase, PoolCreatedAndDestroyedAtOnceNeverHangs) {
  const PoolConfig pc = PoolOn(dir_ + "/pkg", 3);
  double t0 = NowSeconds();
  for (int i = 0; i < 40; ++i) MakeJudgePool(pc).reset();
  EXPECT_LT(NowSeconds() - t0, 60.0);
}

TEST_P(WorkerTest, DeathAtStartup) {
  std::string err;
  auto w = Worker::Start(Config(ns(), "die-at-start"), &err);
  ASSERT_TRUE(w) << err;
  Reply r = w->WaitReady(20);
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_EQ(r.detail, "exited with code 5");
  EXPECT_TRUE(Contains(w->OutputTail(), "fatal: boom at start")) << w->OutputTail();
}

TEST_P(WorkerTest, MissingPackageDies) {
  WorkerConfig c = Config(ns());
  c.worker_dir = dir_ + "/empty";
  fs::create_directories(c.worker_dir);
  std::string err;
  auto w = Worker::Start(c, &err);
  ASSERT_TRUE(w) << err;
  Reply r = w->WaitReady(20);
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_EQ(r.detail, "exited with code 1");
  EXPECT_TRUE(Contains(w->OutputTail(), "No module named adaexplore_worker")) << w->OutputTail();
}

TEST_P(WorkerTest, KillIsIdempotent) {
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  w->Kill();
  EXPECT_FALSE(w->alive());
  w->Kill();
  Reply r = w->Request({{"op", "echo"}}, 5);
  EXPECT_EQ(r.kind, Reply::kDied);
  EXPECT_EQ(r.detail, "worker is not running");
}

TEST_P(WorkerTest, DeathWithAGrandchildHoldingThePipes) {
  // The worker exits but a process it started keeps its descriptors open.
  auto w = StartReady(Config(ns()));
  ASSERT_TRUE(w);
  double t0 = NowSeconds();
  Reply r = w->Request({{"op", "orphan_exit"}}, 5.0);
  EXPECT_LT(NowSeconds() - t0, 3.0);
  EXPECT_EQ(r.kind, Reply::kDied) << r.detail;
  EXPECT_EQ(r.detail, "exited with code 4");
}

}  // namespace
}  // namespace ax
