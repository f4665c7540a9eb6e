#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/util.h"
#include "judge/sandbox.h"

namespace ax {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------ helpers

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool Contains(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

// Whether this process may create the namespaces the sandbox asks for.
bool CanUseNamespaces() {
  static int cached = -1;
  if (cached < 0) {
    pid_t pid = fork();
    if (pid == 0) _exit(unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS) == 0 ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    cached = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return cached == 1;
}

std::string ReadLink(const std::string& p) {
  char buf[512];
  ssize_t n = readlink(p.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

struct ProcInfo {
  pid_t pid = 0;
  char state = '?';
  pid_t ppid = 0, pgrp = 0, sid = 0;
};

bool ReadProcStat(pid_t pid, ProcInfo* out) {
  auto s = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!s || s->empty()) return false;
  size_t rp = s->rfind(')');
  if (rp == std::string::npos) return false;
  std::istringstream in(s->substr(rp + 2));
  out->pid = pid;
  in >> out->state >> out->ppid >> out->pgrp >> out->sid;
  return static_cast<bool>(in);
}

std::vector<pid_t> AllPids() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.push_back(static_cast<pid_t>(atoi(e->d_name)));
  }
  closedir(d);
  return out;
}

// A process that exists and is not a zombie.
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  ProcInfo pi;
  if (!ReadProcStat(pid, &pi)) return false;
  return pi.state != 'Z' && pi.state != 'X';
}

// Live processes that belong to a sandboxed child: those in its PID namespace
// when it has one (ns_link), else those in its session.
std::vector<pid_t> SandboxMembers(pid_t child, const std::string& ns_link) {
  std::vector<pid_t> out;
  std::string self_ns = ReadLink("/proc/self/ns/pid");
  for (pid_t p : AllPids()) {
    ProcInfo pi;
    if (!ReadProcStat(p, &pi) || pi.state == 'Z' || pi.state == 'X') continue;
    if (!ns_link.empty() && ns_link != self_ns) {
      if (ReadLink("/proc/" + std::to_string(p) + "/ns/pid") == ns_link) out.push_back(p);
    } else if (pi.sid == child) {
      out.push_back(p);
    }
  }
  return out;
}

// The host pid of a process known by `inner` inside the PID namespace ns_link.
pid_t HostPidOf(pid_t inner, const std::string& ns_link) {
  for (pid_t p : AllPids()) {
    if (ReadLink("/proc/" + std::to_string(p) + "/ns/pid") != ns_link) continue;
    auto status = ReadFile("/proc/" + std::to_string(p) + "/status");
    if (!status) continue;
    for (auto& l : Lines(*status)) {
      if (!StartsWith(l, "NSpid:")) continue;
      std::istringstream in(l.substr(6));
      pid_t v = 0, last = 0;
      while (in >> v) last = v;
      if (last == inner) return p;
    }
  }
  return -1;
}

// Mount point (from /proc/self/mountinfo) under which `path` lies.
std::string MountPointOf(const std::string& path) {
  std::string canon = fs::weakly_canonical(path).string();
  auto info = ReadFile("/proc/self/mountinfo");
  std::string best = "/";
  if (!info) return best;
  for (auto& l : Lines(*info)) {
    std::istringstream in(l);
    std::string id, parent, devno, root, mp;
    in >> id >> parent >> devno >> root >> mp;
    // Undo the octal escapes of spaces and the like.
    std::string m;
    for (size_t i = 0; i < mp.size(); ++i) {
      if (mp[i] == '\\' && i + 3 < mp.size()) {
        m.push_back(static_cast<char>(std::stoi(mp.substr(i + 1, 3), nullptr, 8)));
        i += 3;
      } else {
        m.push_back(mp[i]);
      }
    }
    bool under = m == "/" || canon == m || StartsWith(canon, m + "/");
    if (under && m.size() > best.size()) best = m;
  }
  return best;
}

// The pids cgroup of a process: the v1 "pids" hierarchy's path, else the
// unified (v2) one; "" when unknown.
std::string PidsCgroupOf(pid_t pid) {
  std::string v2;
  for (auto& l : Lines(ReadFile("/proc/" + std::to_string(pid) + "/cgroup").value_or(""))) {
    size_t c1 = l.find(':'), c2 = c1 == std::string::npos ? c1 : l.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    std::string controllers = l.substr(c1 + 1, c2 - c1 - 1), path = l.substr(c2 + 1);
    std::istringstream in(controllers);
    std::string c;
    while (std::getline(in, c, ',')) {
      if (c == "pids") return path;
    }
    if (controllers.empty()) v2 = path;
  }
  return v2;
}

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

struct RunResult {
  std::string out, err, exit;
  bool timed_out = false;
  double seconds = 0;
};

// Reads the child's stdout and stderr until both close and it has ended, or
// until the deadline, when it is killed.
RunResult Collect(SandboxProcess& p, double timeout_s) {
  RunResult r;
  double t0 = NowSeconds(), deadline = t0 + timeout_s;
  bool out_open = true, err_open = true;
  char buf[65536];
  while ((out_open || err_open) && NowSeconds() < deadline) {
    pollfd fds[2];
    int n = 0, io = -1, ie = -1;
    if (out_open) { fds[n] = {p.out_fd(), POLLIN, 0}; io = n++; }
    if (err_open) { fds[n] = {p.err_fd(), POLLIN, 0}; ie = n++; }
    int pr = poll(fds, n, 50);
    if (pr < 0 && errno != EINTR) break;
    auto drain = [&](int i, int fd, bool& open, std::string& into) {
      if (i < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t k = read(fd, buf, sizeof buf);
      if (k > 0) into.append(buf, static_cast<size_t>(k));
      else if (k == 0 || errno != EINTR) open = false;
    };
    drain(io, p.out_fd(), out_open, r.out);
    drain(ie, p.err_fd(), err_open, r.err);
  }
  while (!p.PollExited() && NowSeconds() < deadline) usleep(5000);
  if (!p.Reaped()) {
    r.timed_out = true;
    p.Kill();
  }
  r.exit = p.Wait();
  r.seconds = NowSeconds() - t0;
  return r;
}

std::string ReadAllFd(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Waits until `path` holds at least `n` lines.
std::vector<std::string> WaitForLines(const std::string& path, size_t n, double timeout_s) {
  double deadline = NowSeconds() + timeout_s;
  std::vector<std::string> lines;
  while (NowSeconds() < deadline) {
    lines = Lines(ReadFile(path).value_or(""));
    if (lines.size() >= n) break;
    usleep(10000);
  }
  return lines;
}

// Waits until none of the pids is alive; returns those still alive.
std::vector<pid_t> WaitGone(const std::vector<pid_t>& pids, double timeout_s) {
  double deadline = NowSeconds() + timeout_s;
  std::vector<pid_t> alive;
  do {
    alive.clear();
    for (pid_t p : pids) {
      if (p > 0 && Alive(p)) alive.push_back(p);
    }
    if (alive.empty()) break;
    usleep(10000);
  } while (NowSeconds() < deadline);
  return alive;
}

// ------------------------------------------------------------------ fixtures

class SandboxTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::TempDir(), "ax_sandbox_test_");
    ASSERT_FALSE(dir_.empty());
    cwd_ = dir_ + "/cwd";
    ASSERT_TRUE(fs::create_directories(cwd_));
  }
  void TearDown() override {
    for (pid_t p : stray_) {
      if (p > 0) kill(p, SIGKILL);
    }
    RemoveTree(dir_);
  }

  SpawnSpec Sh(const std::string& script, bool namespaces) const {
    SpawnSpec s;
    s.argv = {"/bin/sh", "-c", script};
    s.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}};
    s.cwd = cwd_;
    s.writable = {cwd_};
    s.limits.namespaces = namespaces;
    return s;
  }

  std::unique_ptr<SandboxProcess> Spawn(const SpawnSpec& s) {
    std::string err;
    auto p = SandboxProcess::Spawn(s, &err);
    EXPECT_TRUE(p) << err;
    return p;
  }

  RunResult Run(const std::string& script, bool namespaces, double timeout_s = 20) {
    auto p = Spawn(Sh(script, namespaces));
    if (!p) return {};
    return Collect(*p, timeout_s);
  }

  std::string dir_, cwd_;
  std::vector<pid_t> stray_;  // host pids to kill in TearDown if a test fails
};

// Runs each test with namespaces asked for and not: without them (or where the
// OS refuses them) the sandbox falls back to a process group.
class SandboxTest : public SandboxTestBase, public ::testing::WithParamInterface<bool> {
 protected:
  bool ns() const { return GetParam(); }
  // Whether a spawned child actually got namespaces.
  static bool InNs(const SandboxProcess& p) { return StartsWith(p.isolation(), "namespaces"); }
};

INSTANTIATE_TEST_SUITE_P(Modes, SandboxTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "Namespaces" : "ProcessGroup");
                         });

// ------------------------------------------------------------------ DescribeExit

int StatusOf(void (*body)()) {
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    body();
    _exit(99);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

TEST(DescribeExitTest, ExitCodes) {
  EXPECT_EQ(DescribeExit(StatusOf([] { _exit(0); })), "exited with code 0");
  EXPECT_EQ(DescribeExit(StatusOf([] { _exit(3); })), "exited with code 3");
  EXPECT_EQ(DescribeExit(StatusOf([] { _exit(255); })), "exited with code 255");
}

TEST(DescribeExitTest, Signals) {
  EXPECT_EQ(DescribeExit(StatusOf([] { signal(SIGSEGV, SIG_DFL); raise(SIGSEGV); })),
            "killed by signal 11 (Segmentation fault)");
  EXPECT_EQ(DescribeExit(StatusOf([] { raise(SIGKILL); })), "killed by signal 9 (Killed)");
  EXPECT_EQ(DescribeExit(StatusOf([] { signal(SIGTERM, SIG_DFL); raise(SIGTERM); })),
            "killed by signal 15 (Terminated)");
  EXPECT_EQ(DescribeExit(StatusOf([] { signal(SIGABRT, SIG_DFL); raise(SIGABRT); })),
            "killed by signal 6 (Aborted)");
}

TEST(DescribeExitTest, OtherStatus) {
  pid_t pid = fork();
  if (pid == 0) {
    raise(SIGSTOP);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(st));
  EXPECT_TRUE(StartsWith(DescribeExit(st), "ended with status ")) << DescribeExit(st);
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
}

// ------------------------------------------------------------------ ResolveOnPath

TEST(ResolveOnPathTest, FindsProgramsOnPath) {
  std::string sh = ResolveOnPath("sh");
  ASSERT_TRUE(StartsWith(sh, "/")) << sh;
  EXPECT_EQ(fs::path(sh).filename(), "sh");
  EXPECT_EQ(access(sh.c_str(), X_OK), 0);
}

TEST(ResolveOnPathTest, PathsWithSlashesAreUnchanged) {
  EXPECT_EQ(ResolveOnPath("/bin/sh"), "/bin/sh");
  EXPECT_EQ(ResolveOnPath("./sh"), "./sh");
  EXPECT_EQ(ResolveOnPath("/no/such/prog"), "/no/such/prog");
  EXPECT_EQ(ResolveOnPath("a/b"), "a/b");
}

TEST(ResolveOnPathTest, MissingProgramIsUnchanged) {
  EXPECT_EQ(ResolveOnPath("ax-no-such-program-zz9"), "ax-no-such-program-zz9");
}

TEST(ResolveOnPathTest, UsesPathOrderAndSkipsNonExecutables) {
  std::string d = MakeTempDir(::testing::TempDir(), "ax_path_test_");
  ASSERT_FALSE(d.empty());
  fs::create_directories(d + "/a");
  fs::create_directories(d + "/b");
  fs::create_directories(d + "/c");
  ASSERT_TRUE(WriteFile(d + "/a/axprog", "#!/bin/sh\n"));
  chmod((d + "/a/axprog").c_str(), 0644);  // not executable: skipped
  ASSERT_TRUE(WriteFile(d + "/b/axprog", "#!/bin/sh\n"));
  chmod((d + "/b/axprog").c_str(), 0755);
  ASSERT_TRUE(WriteFile(d + "/c/axprog", "#!/bin/sh\n"));
  chmod((d + "/c/axprog").c_str(), 0755);
  {
    // Empty components are ignored.
    ScopedEnv path("PATH", ("::" + d + "/missing:" + d + "/a:" + d + "/b:" + d + "/c").c_str());
    EXPECT_EQ(ResolveOnPath("axprog"), d + "/b/axprog");
  }
  {
    ScopedEnv path("PATH", (d + "/c:" + d + "/b").c_str());
    EXPECT_EQ(ResolveOnPath("axprog"), d + "/c/axprog");
  }
  RemoveTree(d);
}

// ------------------------------------------------------------------ Spawn basics

TEST_F(SandboxTestBase, SpawnErrors) {
  std::string err;
  SpawnSpec s = Sh("true", false);
  s.argv.clear();
  EXPECT_EQ(SandboxProcess::Spawn(s, &err), nullptr);
  EXPECT_EQ(err, "empty command");
  err.clear();
  s.argv = {"ax-no-such-program-zz9"};
  EXPECT_EQ(SandboxProcess::Spawn(s, &err), nullptr);
  EXPECT_TRUE(StartsWith(err, "cannot execute ax-no-such-program-zz9")) << err;
  err.clear();
  // A directory passes the access(X_OK) pre-check; exec then fails in the
  // child, which exits with 127.
  s.argv = {cwd_};
  auto p = SandboxProcess::Spawn(s, &err);
  if (p) {
    EXPECT_EQ(Collect(*p, 20).exit, "exited with code 127");
  } else {
    EXPECT_TRUE(StartsWith(err, "cannot execute")) << err;
  }
}

TEST_P(SandboxTest, IsolationMatchesWhatTheOsAllows) {
  auto p = Spawn(Sh("exit 0", ns()));
  ASSERT_TRUE(p);
  std::string iso = p->isolation();
  if (ns() && CanUseNamespaces()) {
    EXPECT_TRUE(StartsWith(iso, "namespaces")) << iso;
  } else {
    EXPECT_TRUE(StartsWith(iso, "process-group")) << iso;
    EXPECT_FALSE(Contains(iso, "readonly-fs")) << iso;
  }
  EXPECT_EQ(Collect(*p, 20).exit, "exited with code 0");
}

TEST_P(SandboxTest, RunsScriptAndCapturesOutput) {
  auto p = Spawn(Sh("echo out; echo err >&2; exit 0", ns()));
  ASSERT_TRUE(p);
  EXPECT_GT(p->pid(), 0);
  EXPECT_FALSE(p->isolation().empty());
  RunResult r = Collect(*p, 20);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit, "exited with code 0");
  EXPECT_TRUE(p->Reaped());
}

TEST_P(SandboxTest, ExitCodeIsDescribed) {
  EXPECT_EQ(Run("exit 3", ns()).exit, "exited with code 3");
  EXPECT_EQ(Run("exit 255", ns()).exit, "exited with code 255");
}

TEST_P(SandboxTest, ArgvZeroIsResolvedOnPath) {
  SpawnSpec s = Sh("", ns());
  s.argv = {"sh", "-c", "echo resolved \"$0\"", "zero"};
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.out, "resolved zero\n");
  EXPECT_EQ(r.exit, "exited with code 0");
}

TEST_P(SandboxTest, SignalIsDescribed) {
  auto p = Spawn(Sh("exec sleep 1000", ns()));
  ASSERT_TRUE(p);
  if (InNs(*p)) {
    // A PID namespace's first process ignores every signal it has no handler
    // for except SIGKILL, even from the parent; only Kill ends it.
    usleep(50000);
    kill(p->pid(), SIGTERM);
    usleep(100000);
    EXPECT_FALSE(p->PollExited());
    p->Kill();
    EXPECT_EQ(p->Wait(), "killed by signal 9 (Killed)");
  } else {
    kill(p->pid(), SIGTERM);
    EXPECT_EQ(p->Wait(), "killed by signal 15 (Terminated)");
  }
  // A process that signals itself (outside a namespace init) is described too.
  RunResult r = Run("kill -SEGV $$; echo survived", ns());
  if (r.out.empty()) {
    EXPECT_EQ(r.exit, "killed by signal 11 (Segmentation fault)");
  } else {
    EXPECT_EQ(r.out, "survived\n");  // a namespace init cannot be signalled by itself
    EXPECT_EQ(r.exit, "exited with code 0");
  }
  // A grandchild's death by signal is seen by its shell.
  r = Run("sh -c 'kill -SEGV $$'; echo \"rc=$?\"", ns());
  EXPECT_EQ(r.out, "rc=139\n");
}

TEST_P(SandboxTest, StdinAndProtocolDescriptor) {
  auto p = Spawn(Sh("read line; echo \"got:$line\"; echo \"proto:$line\" >&3; cat", ns()));
  ASSERT_TRUE(p);
  const char msg[] = "hello\nrest of input\n";
  ASSERT_EQ(write(p->in_fd(), msg, sizeof msg - 1), static_cast<ssize_t>(sizeof msg - 1));
  p->CloseInput();
  EXPECT_EQ(p->in_fd(), -1);
  p->CloseInput();  // idempotent
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.out, "got:hello\nrest of input\n");
  EXPECT_EQ(r.exit, "exited with code 0");
  EXPECT_EQ(ReadAllFd(p->proto_fd()), "proto:hello\n");
}

TEST_P(SandboxTest, EnvironmentIsExactlyTheSpec) {
  ScopedEnv secret("AX_PARENT_SECRET", "leaked");
  SpawnSpec s = Sh("env", ns());
  s.env["AX_ONLY"] = "yes it is";
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.exit, "exited with code 0");
  EXPECT_TRUE(Contains(r.out, "AX_ONLY=yes it is\n")) << r.out;
  EXPECT_FALSE(Contains(r.out, "AX_PARENT_SECRET")) << r.out;
  std::set<std::string> names;
  for (auto& l : Lines(r.out)) names.insert(l.substr(0, l.find('=')));
  names.erase("PWD");  // the shell exports its working directory
  EXPECT_EQ(names, (std::set<std::string>{"AX_ONLY", "PATH"})) << r.out;
}

TEST_P(SandboxTest, WorkingDirectoryIsCwd) {
  RunResult r = Run("pwd -P; echo data > here.txt", ns());
  EXPECT_EQ(r.exit, "exited with code 0");
  EXPECT_EQ(Trim(r.out), fs::canonical(cwd_).string());
  EXPECT_EQ(ReadFile(cwd_ + "/here.txt").value_or(""), "data\n");
}

TEST_P(SandboxTest, MissingCwdFailsWithCode125) {
  SpawnSpec s = Sh("echo should not run", ns());
  s.cwd = dir_ + "/no/such/dir";
  s.writable = {cwd_};
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.exit, "exited with code 125");
}

TEST_P(SandboxTest, OwnSessionAndProcessGroup) {
  auto p = Spawn(Sh("cat /proc/$$/stat; echo; echo \"pid=$$\"", ns()));
  ASSERT_TRUE(p);
  pid_t host_pid = p->pid();
  bool in_ns = InNs(*p);
  RunResult r = Collect(*p, 20);
  ASSERT_EQ(r.exit, "exited with code 0");
  auto lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  std::string stat = lines[0];
  size_t rp = stat.rfind(')');
  ASSERT_NE(rp, std::string::npos) << stat;
  std::istringstream in(stat.substr(rp + 2));
  char state;
  long ppid, pgrp, sid;
  in >> state >> ppid >> pgrp >> sid;
  long self = std::stol(stat);
  EXPECT_EQ(pgrp, self);
  EXPECT_EQ(sid, self);
  if (in_ns && !Contains(p->isolation(), "host-proc")) {
    EXPECT_EQ(self, 1);  // first process of its own PID namespace
  } else if (!in_ns) {
    EXPECT_EQ(self, host_pid);
  }
  EXPECT_NE(sid, getsid(0));
}

TEST_P(SandboxTest, ResourceLimitsAreApplied) {
  SpawnSpec s = Sh("cat /proc/self/limits; grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd)' /proc/self/status", ns());
  s.limits.max_open_files = 77;
  s.limits.max_processes = 345;
  s.limits.max_file_bytes = 123456;
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  ASSERT_EQ(r.exit, "exited with code 0") << r.err;
  std::map<std::string, std::string> lim;
  for (auto& l : Lines(r.out)) {
    if (StartsWith(l, "Max open files")) lim["nofile"] = l;
    if (StartsWith(l, "Max processes")) lim["nproc"] = l;
    if (StartsWith(l, "Max file size")) lim["fsize"] = l;
    if (StartsWith(l, "Max core file size")) lim["core"] = l;
  }
  auto soft_hard = [](const std::string& l) {
    std::istringstream in(l.substr(26));
    std::string a, b;
    in >> a >> b;
    return a + " " + b;
  };
  EXPECT_EQ(soft_hard(lim["nofile"]), "77 77") << lim["nofile"];
  EXPECT_EQ(soft_hard(lim["nproc"]), "345 345") << lim["nproc"];
  EXPECT_EQ(soft_hard(lim["fsize"]), "123456 123456") << lim["fsize"];
  EXPECT_EQ(soft_hard(lim["core"]), "0 0") << lim["core"];
  EXPECT_TRUE(Contains(r.out, "NoNewPrivs:\t1")) << r.out;
  if (geteuid() == 0) {
    // Root's capabilities are gone after exec.
    EXPECT_TRUE(Contains(r.out, "CapEff:\t0000000000000000")) << r.out;
    EXPECT_TRUE(Contains(r.out, "CapPrm:\t0000000000000000")) << r.out;
    EXPECT_TRUE(Contains(r.out, "CapBnd:\t0000000000000000")) << r.out;
  }
}

TEST_P(SandboxTest, FileSizeLimitIsEnforced) {
  SpawnSpec s = Sh("head -c 50000 /dev/zero > big; echo \"rc=$?\"; printf 12345 > small; echo \"small=$?\"", ns());
  s.limits.max_file_bytes = 10000;
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.exit, "exited with code 0");
  auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out << r.err;
  EXPECT_NE(lines[0], "rc=0");  // head died of SIGXFSZ (rc 153) or saw EFBIG
  EXPECT_EQ(lines[1], "small=0");
  std::error_code ec;
  EXPECT_LE(fs::file_size(cwd_ + "/big", ec), 10000u);
  EXPECT_EQ(fs::file_size(cwd_ + "/small", ec), 5u);
}

TEST_P(SandboxTest, DoesNotLeakParentDescriptors) {
  int fd = open("/dev/null", O_RDONLY);  // deliberately inheritable
  ASSERT_GE(fd, 0);
  int high = fcntl(fd, F_DUPFD, 40);    // and one at a high number
  ASSERT_GE(high, 40);
  auto p = Spawn(Sh("ls /proc/$$/fd", ns()));
  close(fd);
  close(high);
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  ASSERT_EQ(r.exit, "exited with code 0") << r.err;
  std::set<std::string> fds;
  for (auto& l : Lines(r.out)) fds.insert(Trim(l));
  EXPECT_EQ(fds, (std::set<std::string>{"0", "1", "2", "3"})) << r.out;
}

TEST_P(SandboxTest, PollExitedAndIdempotentKillWait) {
  auto p = Spawn(Sh("sleep 0.3; exit 4", ns()));
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->PollExited());
  EXPECT_FALSE(p->Reaped());
  double deadline = NowSeconds() + 20;
  while (!p->PollExited() && NowSeconds() < deadline) usleep(10000);
  ASSERT_TRUE(p->Reaped());
  EXPECT_TRUE(p->PollExited());
  EXPECT_EQ(p->Wait(), "exited with code 4");
  p->Kill();  // after reaping: a no-op
  EXPECT_EQ(p->Wait(), "exited with code 4");
}

TEST_P(SandboxTest, KillEndsAHangingChildPromptly) {
  auto p = Spawn(Sh("sleep 1000", ns()));
  ASSERT_TRUE(p);
  usleep(50000);
  double t0 = NowSeconds();
  p->Kill();
  p->Kill();  // idempotent
  std::string how = p->Wait();
  EXPECT_LT(NowSeconds() - t0, 2.0);
  EXPECT_EQ(how, "killed by signal 9 (Killed)");
  EXPECT_EQ(p->Wait(), how);
}

// The parent-death signal follows the thread that forked a child, not the
// process: a child started from a thread that has since ended lives on (a
// judge's reference worker, started by a bench job, was killed mid-comparison
// when that job ran out of tasks).
TEST_P(SandboxTest, OutlivesTheThreadThatStartedIt) {
  std::unique_ptr<SandboxProcess> p;
  std::thread([&] { p = Spawn(Sh("sleep 1000", ns())); }).join();
  ASSERT_TRUE(p);
  usleep(300000);
  EXPECT_FALSE(p->PollExited()) << p->Wait();
  p->Kill();
  EXPECT_EQ(p->Wait(), "killed by signal 9 (Killed)");
}

// ... and still dies with the process that started it.
TEST_P(SandboxTest, DiesWithTheProcessThatStartedIt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const SpawnSpec spec = Sh("sleep 1000", ns());
  pid_t helper = fork();
  if (helper == 0) {
    close(fds[0]);
    std::string err;
    auto c = SandboxProcess::Spawn(spec, &err);
    pid_t cp = c ? c->pid() : -1;
    (void)!write(fds[1], &cp, sizeof cp);
    (void)c.release();  // the helper's end must end the child, not a destructor
    _exit(0);
  }
  ASSERT_GT(helper, 0);
  close(fds[1]);
  pid_t child = -1;
  ASSERT_EQ(read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  close(fds[0]);
  int st = 0;
  waitpid(helper, &st, 0);
  ASSERT_GT(child, 0);
  stray_.push_back(child);
  // Gone, or a zombie that nobody here reaps.
  auto dead = [&] {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    size_t close_paren = line.rfind(')');
    return close_paren != std::string::npos && close_paren + 2 < line.size() && line[close_paren + 2] == 'Z';
  };
  bool gone = false;
  for (int i = 0; i < 60 && !(gone = dead()); ++i) usleep(50000);
  EXPECT_TRUE(gone) << "the child of a process that ended is still running";
}

// A judge killed outright leaves its workers' cgroups (w<pid>_<n>) behind;
// a later spawn removes the empty ones whose pid no longer runs.
TEST(SandboxSweep, RemovesTheEmptyCgroupsOfProcessesNoLongerRunning) {
  const std::string base = MakeTempDir(fs::temp_directory_path().string(), "ax_sweep_");
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string d = std::to_string(dead), live = std::to_string(getppid()), self = std::to_string(getpid());
  for (const std::string& n : std::vector<std::string>{"w" + d + "_0", "w" + d + "_7", "w" + d + "_busy", "w" + live + "_0", "w" + self + "_0",
                               "other", "w_0", "wx_0"}) {
    ASSERT_TRUE(fs::create_directory(base + "/" + n)) << n;
  }
  std::ofstream(base + "/w" + d + "_busy/cgroup.procs") << "123\n";  // not empty: rmdir refuses it
  SweepStaleCgroups(base);
  EXPECT_FALSE(fs::exists(base + "/w" + d + "_0"));
  EXPECT_FALSE(fs::exists(base + "/w" + d + "_7"));
  EXPECT_TRUE(fs::exists(base + "/w" + d + "_busy"));
  EXPECT_TRUE(fs::exists(base + "/w" + live + "_0")) << "its process runs";
  EXPECT_TRUE(fs::exists(base + "/w" + self + "_0")) << "this process's own";
  for (const char* n : {"other", "w_0", "wx_0"}) EXPECT_TRUE(fs::exists(base + "/" + n)) << n;
  SweepStaleCgroups(base + "/missing");  // a root that does not exist: nothing to do
  fs::remove_all(base);
}

TEST_P(SandboxTest, DestructorKillsAndReaps) {
  pid_t pid;
  std::string ns_link;
  {
    auto p = Spawn(Sh("sleep 1000 & sleep 1000", ns()));
    ASSERT_TRUE(p);
    pid = p->pid();
    if (InNs(*p)) ns_link = ReadLink("/proc/" + std::to_string(pid) + "/ns/pid");
    usleep(50000);
  }
  // Reaped: not even a zombie is left.
  errno = 0;
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(WaitGone(SandboxMembers(pid, ns_link), 3).empty());
}

// The child starts grandchildren that ignore SIGTERM/SIGHUP, some in new
// sessions (setsid) and some orphaned; after Kill and Wait none may be left.
TEST_P(SandboxTest, KillEndsEscapingGrandchildren) {
  std::string setsid = ResolveOnPath("setsid");
  bool have_setsid = StartsWith(setsid, "/");
  ASSERT_TRUE(WriteFile(cwd_ + "/gc.sh", "trap '' TERM HUP INT\necho \"$1 $$\" >> pids\nexec sleep 1000\n"));
  std::string script =
      "trap '' TERM HUP INT\n"
      "echo \"main $$\" >> pids\n"
      "sh ./gc.sh plain &\n"
      "sh -c 'sh ./gc.sh orphan & exit 0' &\n";
  size_t expect = 3;
  if (have_setsid) {
    script +=
        "setsid sh ./gc.sh setsid &\n"
        "sh -c 'setsid sh ./gc.sh setsid-orphan & exit 0' &\n";
    expect += 2;
  }
  script += "exec sleep 1000\n";
  auto p = Spawn(Sh(script, ns()));
  ASSERT_TRUE(p);
  bool in_ns = InNs(*p);
  std::string ns_link = in_ns ? ReadLink("/proc/" + std::to_string(p->pid()) + "/ns/pid") : "";
  auto lines = WaitForLines(cwd_ + "/pids", expect, 10);
  ASSERT_EQ(lines.size(), expect) << ReadFile(cwd_ + "/pids").value_or("");
  std::map<std::string, pid_t> host;  // role -> host pid
  for (auto& l : lines) {
    std::istringstream in(l);
    std::string role;
    pid_t pid = 0;
    in >> role >> pid;
    pid_t h = in_ns ? HostPidOf(pid, ns_link) : pid;
    ASSERT_GT(h, 0) << l;
    ASSERT_TRUE(Alive(h)) << l;
    host[role] = h;
    stray_.push_back(h);
  }
  EXPECT_EQ(host["main"], p->pid());
  // Give the shells a moment to finish their exec of sleep.
  usleep(100000);
  double t0 = NowSeconds();
  p->Kill();
  std::string how = p->Wait();
  EXPECT_LT(NowSeconds() - t0, 3.0);
  EXPECT_EQ(how, "killed by signal 9 (Killed)");
  bool contained = in_ns || Contains(p->isolation(), "pids-cgroup");
  for (auto& [role, h] : host) {
    if (StartsWith(role, "setsid") && !contained) {
      // Without namespaces or a cgroup, a process that left the session
      // cannot be found again: a documented limit of the fallback (TearDown
      // kills it).
      continue;
    }
    auto left = WaitGone({h}, 3);
    EXPECT_TRUE(left.empty()) << role << " (host pid " << h << ") survived; isolation " << p->isolation();
  }
  if (!contained && have_setsid) {
    GTEST_SKIP() << "setsid grandchildren are only contained with namespaces or a pids cgroup ("
                 << p->isolation() << ")";
  }
}

// Tasks (threads included) whose real uid is `uid`: what RLIMIT_NPROC counts.
long CountUserTasks(uid_t uid) {
  long n = 0;
  for (pid_t p : AllPids()) {
    auto st = ReadFile("/proc/" + std::to_string(p) + "/status");
    if (!st) continue;
    long threads = 1;
    bool mine = false;
    for (auto& l : Lines(*st)) {
      if (StartsWith(l, "Uid:")) mine = std::stol(l.substr(4)) == static_cast<long>(uid);
      if (StartsWith(l, "Threads:")) threads = std::stol(l.substr(8));
    }
    if (mine) n += threads;
  }
  return n;
}

// A fork bomb stays within max_processes and Kill ends all of it.
TEST_P(SandboxTest, ForkBombIsContained) {
  constexpr long kBomb = 24;  // processes the bomb may have
  long max_processes = kBomb;
  {
    // Only run it where the OS will bound it: root's RLIMIT_NPROC is not
    // enforced, so root needs namespaces' cgroup; others have RLIMIT_NPROC.
    auto probe = Spawn(Sh("exit 0", ns()));
    ASSERT_TRUE(probe);
    std::string iso = probe->isolation();
    probe->Wait();
    if (geteuid() == 0 && !Contains(iso, "pids-cgroup")) {
      GTEST_SKIP() << "no pids cgroup for root here (" << iso << "): a fork bomb would not be bounded";
    }
    if (!Contains(iso, "pids-cgroup")) {
      // RLIMIT_NPROC counts every task of the user, not just the sandbox's.
      max_processes = CountUserTasks(getuid()) + kBomb;
    }
  }
  // Every shell that fails to fork exits and frees a slot for another, so the
  // bomb keeps the process table full until it is killed.
  ASSERT_TRUE(WriteFile(cwd_ + "/bomb.sh", "while true; do sh -c 'sleep 100' & sh ./bomb.sh & done\n"));
  SpawnSpec s = Sh("exec 2>/dev/null; sh ./bomb.sh & exec sleep 1000", ns());
  s.limits.max_processes = max_processes;
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  bool in_ns = InNs(*p);
  std::string ns_link = in_ns ? ReadLink("/proc/" + std::to_string(p->pid()) + "/ns/pid") : "";
  size_t most = 0;
  double t0 = NowSeconds();
  // a second at least; on a loaded machine up to five for the bomb to start
  for (double dt = 0; dt < 1.0 || (most <= 3 && dt < 5.0); dt = NowSeconds() - t0) {
    most = std::max(most, SandboxMembers(p->pid(), ns_link).size());
    usleep(5000);
  }
  RecordProperty("most_processes", static_cast<int>(most));
  if (Contains(p->isolation(), "pids-cgroup")) {
    // (Under RLIMIT_NPROC alone other processes of the user compete for it.)
    EXPECT_GT(most, 3u) << "the bomb did not get going";
  }
  EXPECT_LE(most, static_cast<size_t>(kBomb) + 2) << p->isolation();
  auto members = SandboxMembers(p->pid(), ns_link);
  stray_.insert(stray_.end(), members.begin(), members.end());
  double t1 = NowSeconds();
  p->Kill();
  std::string how = p->Wait();
  EXPECT_LT(NowSeconds() - t1, 5.0);
  EXPECT_EQ(how, "killed by signal 9 (Killed)");
  // Nothing of it is left.
  auto left = WaitGone(members, 5);
  EXPECT_TRUE(left.empty()) << left.size() << " processes survived";
  double deadline = NowSeconds() + 5;
  std::vector<pid_t> now;
  do {
    now = SandboxMembers(p->pid(), ns_link);
    if (now.empty()) break;
    usleep(20000);
  } while (NowSeconds() < deadline);
  EXPECT_TRUE(now.empty()) << now.size() << " processes of the bomb are still running";
  stray_.insert(stray_.end(), now.begin(), now.end());
}

// ------------------------------------------------------------------ namespaces

class SandboxNsTest : public SandboxTestBase {
 protected:
  void SetUp() override {
    SandboxTestBase::SetUp();
    if (!CanUseNamespaces()) GTEST_SKIP() << "namespaces are not available here (not root?)";
  }
  // Spawns with namespaces; skips unless the child really got them.
  std::unique_ptr<SandboxProcess> SpawnNs(const SpawnSpec& s) {
    auto p = Spawn(s);
    if (p && !StartsWith(p->isolation(), "namespaces")) {
      ADD_FAILURE() << "namespaces are available but the sandbox did not use them: " << p->isolation();
      return nullptr;
    }
    return p;
  }
};

TEST_F(SandboxNsTest, IsolationStringReflectsNamespaces) {
  auto p = SpawnNs(Sh("exec sleep 1000", true));
  ASSERT_TRUE(p);
  std::string iso = p->isolation();
  EXPECT_TRUE(StartsWith(iso, "namespaces")) << iso;
  EXPECT_FALSE(Contains(iso, "process-group")) << iso;
  // Where the OS lets a root process mount at all, both of these work.
  if (geteuid() == 0) {
    EXPECT_TRUE(Contains(iso, "+readonly-fs")) << iso;
    EXPECT_FALSE(Contains(iso, "host-proc")) << iso;
  }
  // The child's cgroup matches the claim.
  std::string cg = PidsCgroupOf(p->pid());
  EXPECT_EQ(Contains(iso, "+pids-cgroup"), Contains(cg, "/adaexplore/w")) << iso << "\n" << cg;
  p->Kill();
  p->Wait();
}

TEST_F(SandboxTestBase, IsolationStringWithoutNamespaces) {
  auto p = Spawn(Sh("exec sleep 1000", false));
  ASSERT_TRUE(p);
  std::string iso = p->isolation();
  EXPECT_TRUE(StartsWith(iso, "process-group")) << iso;
  EXPECT_FALSE(Contains(iso, "namespaces")) << iso;
  EXPECT_FALSE(Contains(iso, "readonly-fs")) << iso;
  std::string cg = PidsCgroupOf(p->pid());
  EXPECT_EQ(Contains(iso, "+pids-cgroup"), Contains(cg, "/adaexplore/w")) << iso << "\n" << cg;
  p->Kill();
  p->Wait();
}

TEST_F(SandboxNsTest, MissingWritableFolderMeansNoReadOnlyClaim) {
  SpawnSpec s = Sh("echo ran", true);
  s.writable = {cwd_, dir_ + "/does/not/exist"};
  auto p = SpawnNs(s);
  ASSERT_TRUE(p);
  EXPECT_FALSE(Contains(p->isolation(), "readonly-fs")) << p->isolation();
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_EQ(r.exit, "exited with code 0");
}

TEST_F(SandboxNsTest, NoNetwork) {
  // A listener of the parent on 127.0.0.1.
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(ls, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len), 0);
  int port = ntohs(a.sin_port);
  char hex[16];
  snprintf(hex, sizeof hex, ":%04X ", port);
  // Control: the parent sees its own listener in /proc/net/tcp.
  ASSERT_TRUE(Contains(ReadFile("/proc/net/tcp").value_or(""), hex));

  auto p = SpawnNs(Sh("cat /proc/net/dev; echo ===; cat /proc/net/tcp", true));
  ASSERT_TRUE(p);
  RunResult r = Collect(*p, 20);
  ASSERT_EQ(r.exit, "exited with code 0") << r.err;
  std::string dev = r.out.substr(0, r.out.find("==="));
  std::string tcp = r.out.substr(r.out.find("===") + 3);
  std::vector<std::string> ifaces;
  for (auto& l : Lines(dev)) {
    size_t c = l.find(':');
    if (c == std::string::npos) continue;
    ifaces.push_back(Trim(l.substr(0, c)));
  }
  EXPECT_EQ(ifaces, std::vector<std::string>{"lo"}) << dev;
  EXPECT_FALSE(Contains(tcp, hex)) << tcp;

  // And a real connection attempt fails (needs a Python for the socket call).
  std::string py = ResolveOnPath("python3");
  if (StartsWith(py, "/")) {
    std::string code = "import socket\ns = socket.socket()\ns.settimeout(3)\nprint(s.connect_ex(('127.0.0.1', " +
                       std::to_string(port) + ")))\n";
    SpawnSpec s = Sh("", true);
    s.argv = {py, "-c", code};
    auto q = SpawnNs(s);
    ASSERT_TRUE(q);
    RunResult rq = Collect(*q, 20);
    EXPECT_EQ(rq.exit, "exited with code 0") << rq.err;
    EXPECT_NE(Trim(rq.out), "0") << "connected to the parent's listener";
    EXPECT_FALSE(Trim(rq.out).empty()) << rq.err;
    // Control: without namespaces the same connection succeeds.
    s.limits.namespaces = false;
    auto c = Spawn(s);
    ASSERT_TRUE(c);
    RunResult rc = Collect(*c, 20);
    EXPECT_EQ(Trim(rc.out), "0") << rc.err;
  }
  close(ls);
}

TEST_F(SandboxNsTest, SeesOnlyItsOwnProcesses) {
  auto p = SpawnNs(Sh("echo \"pid=$$\"; for d in /proc/[0-9]*; do echo \"${d#/proc/}\"; done", true));
  ASSERT_TRUE(p);
  if (Contains(p->isolation(), "host-proc")) GTEST_SKIP() << "no private /proc here: " << p->isolation();
  RunResult r = Collect(*p, 20);
  ASSERT_EQ(r.exit, "exited with code 0") << r.err;
  auto lines = Lines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "pid=1");
  std::vector<long> pids;
  for (size_t i = 1; i < lines.size(); ++i) pids.push_back(std::stol(lines[i]));
  // Just the shell itself (the glob runs in it, no other process).
  EXPECT_EQ(pids, std::vector<long>{1}) << r.out;
  // Cross-check: the host has many more.
  EXPECT_GT(AllPids().size(), 1u);
}

TEST_F(SandboxNsTest, FileSystemIsReadOnlyOutsideWritable) {
  // A folder outside `writable`, on the root mount (which the sandbox
  // remounts read-only; other mounts such as a tmpfs /tmp are not covered).
  std::string outside;
  for (std::string parent : {::testing::TempDir(), std::string("/var/tmp"), std::string(ADAEXPLORE_SOURCE_DIR)}) {
    if (parent.empty() || !fs::is_directory(parent)) continue;
    if (MountPointOf(parent) != "/") continue;
    outside = MakeTempDir(parent, "ax_sandbox_ro_");
    if (!outside.empty()) break;
  }
  if (outside.empty()) GTEST_SKIP() << "no folder on the root mount to test with";
  // Readable by the child (it runs with no capabilities).
  chmod(outside.c_str(), 0755);
  ASSERT_TRUE(WriteFile(outside + "/existing", "original\n"));
  std::string script =
      "echo inside > ./mine.txt && echo inside-ok\n"
      "echo outside > '" + outside + "/new.txt' || echo outside-failed\n"
      "echo changed > '" + outside + "/existing' || echo existing-failed\n"
      "cat '" + outside + "/existing'\n"
      "mkdir '" + outside + "/sub' || echo mkdir-failed\n";
  auto p = SpawnNs(Sh(script, true));
  ASSERT_TRUE(p);
  if (!Contains(p->isolation(), "readonly-fs")) {
    p->Kill();
    p->Wait();
    RemoveTree(outside);
    GTEST_SKIP() << "the OS did not allow a read-only remount here: " << p->isolation();
  }
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.exit, "exited with code 0");
  EXPECT_TRUE(Contains(r.out, "inside-ok")) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out, "outside-failed")) << r.out;
  EXPECT_TRUE(Contains(r.out, "existing-failed")) << r.out;
  EXPECT_TRUE(Contains(r.out, "original")) << r.out;
  EXPECT_TRUE(Contains(r.out, "mkdir-failed")) << r.out;
  EXPECT_TRUE(Contains(r.err, "Read-only file system")) << r.err;
  EXPECT_EQ(ReadFile(cwd_ + "/mine.txt").value_or(""), "inside\n");
  EXPECT_FALSE(fs::exists(outside + "/new.txt"));
  EXPECT_FALSE(fs::exists(outside + "/sub"));
  EXPECT_EQ(ReadFile(outside + "/existing").value_or(""), "original\n");
  // The parent's own view is untouched.
  EXPECT_TRUE(WriteFile(outside + "/after", "parent can still write"));
  RemoveTree(outside);
}

TEST_F(SandboxNsTest, EveryWritableFolderIsWritable) {
  std::string second = dir_ + "/cache";
  ASSERT_TRUE(fs::create_directories(second));
  SpawnSpec s = Sh("echo a > ./a && echo b > '" + second + "/b' && echo ok", true);
  s.writable = {cwd_, second};
  auto p = SpawnNs(s);
  ASSERT_TRUE(p);
  EXPECT_TRUE(Contains(p->isolation(), "readonly-fs")) << p->isolation();
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.out, "ok\n") << r.err;
  EXPECT_EQ(ReadFile(second + "/b").value_or(""), "b\n");
}

TEST_F(SandboxNsTest, KillingTheFirstProcessEndsTheNamespace) {
  // A grandchild that the first process does not wait for must go too.
  auto p = SpawnNs(Sh("sh -c 'trap \"\" TERM; echo $$ > gc; exec sleep 1000' & echo started; exec sleep 1000", true));
  ASSERT_TRUE(p);
  std::string ns_link = ReadLink("/proc/" + std::to_string(p->pid()) + "/ns/pid");
  auto l = WaitForLines(cwd_ + "/gc", 1, 10);
  ASSERT_EQ(l.size(), 1u);
  pid_t gc = HostPidOf(std::stoi(l[0]), ns_link);
  ASSERT_GT(gc, 0);
  stray_.push_back(gc);
  p->Kill();
  EXPECT_EQ(p->Wait(), "killed by signal 9 (Killed)");
  EXPECT_TRUE(WaitGone({gc}, 3).empty());
  EXPECT_TRUE(SandboxMembers(p->pid(), ns_link).empty());
}

// ------------------------------------------------------------------ descriptor channel

std::string ChannelPython() {
  const char* p = getenv("ADAEXPLORE_PYTHON");
  return (p && *p) ? p : "python3";
}

TEST_P(SandboxTest, DescriptorChannelPassesDescriptorsBothWays) {
  // The child reads from the descriptor it is sent and answers with a pipe
  // of its own holding the text upper-cased.
  SpawnSpec s = Sh("", ns());
  s.argv = {ChannelPython(), "-c",
            "import os, socket\n"
            "s = socket.socket(fileno=4)\n"
            "_, fds, _, _ = socket.recv_fds(s, 1, 1)\n"
            "data = os.pread(fds[0], 100, 0)\n"
            "r, w = os.pipe(); os.write(w, data.upper()); os.close(w)\n"
            "socket.send_fds(s, [b'f'], [r])\n"
            "print('sent')\n"};
  s.channel = true;
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  ASSERT_GE(p->channel_fd(), 0);
  std::string path = dir_ + "/payload.txt";
  ASSERT_TRUE(WriteFile(path, "hello channel"));
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string err;
  ASSERT_TRUE(SendFdOver(p->channel_fd(), fd, &err)) << err;
  close(fd);
  int back = RecvFdOver(p->channel_fd(), 20, &err);
  ASSERT_GE(back, 0) << err;
  char buf[64] = {};
  ssize_t n = read(back, buf, sizeof buf - 1);
  close(back);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "HELLO CHANNEL");
  RunResult r = Collect(*p, 20);
  EXPECT_EQ(r.out, "sent\n") << r.err;
  EXPECT_EQ(r.exit, "exited with code 0") << r.err;
}

TEST_P(SandboxTest, NoChannelMeansNoDescriptorFour) {
  SpawnSpec s = Sh("", ns());
  s.argv = {ChannelPython(), "-c",
            "import os\n"
            "try:\n    os.fstat(4); print('open')\nexcept OSError:\n    print('closed')\n"};
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->channel_fd(), -1);
  std::string err;
  EXPECT_EQ(RecvFdOver(p->channel_fd(), 0.1, &err), -1);
  EXPECT_FALSE(err.empty());
  EXPECT_EQ(Collect(*p, 20).out, "closed\n");
}

TEST_P(SandboxTest, RecvFdTimesOutWhenNothingIsSent) {
  SpawnSpec s = Sh("", ns());
  s.argv = {ChannelPython(), "-c", "import time; time.sleep(2)"};
  s.channel = true;
  auto p = Spawn(s);
  ASSERT_TRUE(p);
  std::string err;
  double t0 = NowSeconds();
  EXPECT_EQ(RecvFdOver(p->channel_fd(), 0.3, &err), -1);
  EXPECT_LT(NowSeconds() - t0, 1.5);
  EXPECT_TRUE(Contains(err, "no descriptor arrived")) << err;
  p->Kill();
  p->Wait();
}

}  // namespace
}  // namespace ax
