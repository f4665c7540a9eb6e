#include "judge/sandbox.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace ax {

namespace {

std::atomic<int> g_cgroup_counter{0};

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

bool WriteSmallFile(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = write(fd, data.data(), data.size());
  close(fd);
  return n == static_cast<ssize_t>(data.size());
}

long long ResolveMemoryLimit(long long want) {
  if (want != 0) return want;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<long long>(pages) * page / 2 : -1;
}

// A memory cgroup (v1 hierarchy) for the child, or "".
// SweepStaleCgroups(base) at the first spawn of this process that uses base:
// what a dead judge left stays dead, so a later spawn would find nothing new.
void SweepOnce(const std::string& base) {
  static std::mutex mu;
  static std::set<std::string> swept;
  std::lock_guard<std::mutex> lock(mu);
  if (swept.insert(base).second) SweepStaleCgroups(base);
}

std::string MakeMemoryCgroupV1(long long max_bytes) {
  if (max_bytes <= 0 || access("/sys/fs/cgroup/memory/cgroup.procs", W_OK) != 0) return "";
  std::string base = "/sys/fs/cgroup/memory/adaexplore";
  mkdir(base.c_str(), 0755);
  SweepOnce(base);
  std::string dir = base + "/w" + std::to_string(getpid()) + "_" + std::to_string(g_cgroup_counter++);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "";
  if (!WriteSmallFile(dir + "/memory.limit_in_bytes", std::to_string(max_bytes))) {
    rmdir(dir.c_str());
    return "";
  }
  return dir;
}

// A pids cgroup for the child (on cgroup v2 also limiting memory), or ""
// when none can be made here.
std::string MakePidsCgroup(long max_pids, long long max_bytes, bool* v2_memory) {
  *v2_memory = false;
  std::string base;
  if (access("/sys/fs/cgroup/pids/cgroup.procs", W_OK) == 0) {
    base = "/sys/fs/cgroup/pids/adaexplore";
  } else if (access("/sys/fs/cgroup/cgroup.subtree_control", W_OK) == 0) {
    WriteSmallFile("/sys/fs/cgroup/cgroup.subtree_control", "+pids");
    WriteSmallFile("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
    base = "/sys/fs/cgroup/adaexplore";
  } else {
    return "";
  }
  mkdir(base.c_str(), 0755);
  SweepOnce(base);
  if (base == "/sys/fs/cgroup/adaexplore") {
    WriteSmallFile(base + "/cgroup.subtree_control", "+pids");
    WriteSmallFile(base + "/cgroup.subtree_control", "+memory");
  }
  std::string dir = base + "/w" + std::to_string(getpid()) + "_" + std::to_string(g_cgroup_counter++);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "";
  if (!WriteSmallFile(dir + "/pids.max", std::to_string(max_pids))) {
    rmdir(dir.c_str());
    return "";
  }
  if (base == "/sys/fs/cgroup/adaexplore" && max_bytes > 0) {
    *v2_memory = WriteSmallFile(dir + "/memory.max", std::to_string(max_bytes));
    WriteSmallFile(dir + "/memory.swap.max", "0");
  }
  return dir;
}

// Runs the fork of every child on one thread that lives as long as the
// process. A child's parent-death signal (PR_SET_PDEATHSIG, below) fires when
// the *thread* that forked it ends, not the process: a worker started from a
// short-lived thread (a bench job that ran out of tasks, a tracing call) was
// killed with SIGKILL when that thread finished, in the middle of judging
// another task's candidate. A forked copy of this process gets a thread of
// its own on its first spawn (the copy has none of its parent's threads).
class ForkThread {
 public:
  static pid_t Run(const std::function<pid_t()>& fork_child) {
    static std::mutex mu;
    static ForkThread* t = nullptr;  // never destroyed: it must outlive every caller
    static pid_t owner = 0;
    ForkThread* use;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!t || owner != getpid()) {
        t = new ForkThread();
        owner = getpid();
      }
      use = t;
    }
    return use->Call(fork_child);
  }

 private:
  ForkThread() { std::thread([this] { Loop(); }).detach(); }

  pid_t Call(const std::function<pid_t()>& fork_child) {
    std::packaged_task<pid_t()> task(fork_child);
    std::future<pid_t> done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return done.get();
  }

  [[noreturn]] void Loop() {
    for (;;) {
      std::packaged_task<pid_t()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<pid_t()>> queue_;
};

// Everything below runs in the child between clone and exec: system calls
// only, no allocation.
constexpr char kReportProc = 1, kReportReadOnly = 2;

[[noreturn]] void ChildMain(char* const* argv, char* const* envp, const char* cwd, char* const* writable,
                            int in_fd, int out_fd, int err_fd, int proto_fd, int channel_fd, int sync_fd,
                            int sync_write_fd, int report_fd, const SandboxLimits& lim, bool in_ns) {
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Wait until the parent has placed us in the cgroup (or given up on one).
  // A parent that died before the line above sends no signal; it sends no
  // go either, and with this copy of the write end closed its death reads
  // as the end of the pipe: the child leaves instead of running orphaned.
  close(sync_write_fd);
  char byte = 0;
  ssize_t got;
  while ((got = read(sync_fd, &byte, 1)) < 0 && errno == EINTR) {
  }
  if (got != 1) _exit(125);
  close(sync_fd);
  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
  // The protocol pipe becomes fd 3 and the descriptor channel fd 4; both go
  // through fresh numbers first so that neither overwrites the other.
  int p = fcntl(proto_fd, F_DUPFD_CLOEXEC, 10);
  int c = channel_fd >= 0 ? fcntl(channel_fd, F_DUPFD_CLOEXEC, 10) : -1;
  if (p < 0 || dup2(p, 3) < 0) _exit(126);
  if (c >= 0 && dup2(c, 4) < 0) _exit(126);
  char report = 0;
  if (in_ns) {
    // A private mount table and a /proc that shows only this namespace.
    mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0) report |= kReportProc;
    // The root file system read-only, but for the folders the child may write.
    bool binds_ok = true;
    for (char* const* w = writable; *w; ++w) {
      if (mount(*w, *w, nullptr, MS_BIND | MS_REC, nullptr) != 0) binds_ok = false;
    }
    if (binds_ok && mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0) {
      report |= kReportReadOnly;
    }
  }
  (void)!write(report_fd, &report, 1);
  close(report_fd);
  struct rlimit rl;
  rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(lim.max_open_files);
  setrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(lim.max_processes);
  setrlimit(RLIMIT_NPROC, &rl);
  rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(lim.max_file_bytes);
  setrlimit(RLIMIT_FSIZE, &rl);
  rl.rlim_cur = rl.rlim_max = 0;
  setrlimit(RLIMIT_CORE, &rl);
  if (cwd[0] && chdir(cwd) != 0) _exit(125);
  if (geteuid() == 0) {
    // Empty the bounding set so that exec grants root no capabilities.
    for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  // Nothing the parent held (its own inherited descriptors) reaches the child.
  const unsigned first = channel_fd >= 0 ? 5U : 4U;
  if (syscall(SYS_close_range, first, ~0U, 0U) != 0) {
    for (int fd = static_cast<int>(first); fd < lim.max_open_files && fd < 65536; ++fd) close(fd);
  }
  execve(argv[0], argv, envp);
  _exit(127);
}

}  // namespace

void SweepStaleCgroups(const std::string& base) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 4 || name[0] != 'w') continue;
    const size_t us = name.find('_');
    if (us == std::string::npos || us < 2) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + 1, &end, 10);
    if (end != name.c_str() + us || pid <= 0 || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    rmdir(e.path().c_str());
  }
}

std::string ResolveOnPath(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty()) {
      std::string cand = dir + "/" + prog;
      if (access(cand.c_str(), X_OK) == 0) return cand;
    }
    start = end + 1;
  }
  return prog;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with status " + std::to_string(status);
}

std::unique_ptr<SandboxProcess> SandboxProcess::Spawn(const SpawnSpec& spec, std::string* error) {
  if (spec.argv.empty()) {
    *error = "empty command";
    return nullptr;
  }
  std::vector<std::string> args = spec.argv;
  args[0] = ResolveOnPath(args[0]);
  if (access(args[0].c_str(), X_OK) != 0) {
    *error = "cannot execute " + args[0] + ": " + strerror(errno);
    return nullptr;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  std::vector<char*> writable;
  for (auto& w : spec.writable) writable.push_back(const_cast<char*>(w.c_str()));
  writable.push_back(nullptr);

  int in[2], proto[2], out[2], err[2], sync[2], rep[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(proto, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) ||
      pipe2(sync, O_CLOEXEC) || pipe2(rep, O_CLOEXEC)) {
    *error = std::string("pipe: ") + strerror(errno);
    return nullptr;
  }
  int chan[2] = {-1, -1};
  if (spec.channel && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) != 0) {
    *error = std::string("socketpair: ") + strerror(errno);
    return nullptr;
  }

  std::unique_ptr<SandboxProcess> p(new SandboxProcess());
  bool in_ns = false;
  int fork_errno = 0;
  const pid_t pid = ForkThread::Run([&]() -> pid_t {
    pid_t child = -1;
    if (spec.limits.namespaces) {
      child = static_cast<pid_t>(syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0));
      if (child == 0) {
        ChildMain(argv.data(), envp.data(), spec.cwd.c_str(), writable.data(), in[0], out[1], err[1], proto[1],
                  chan[1], sync[0], sync[1], rep[1], spec.limits, true);
      }
      in_ns = child > 0;
    }
    if (child < 0) {
      child = fork();
      if (child == 0) {
        ChildMain(argv.data(), envp.data(), spec.cwd.c_str(), writable.data(), in[0], out[1], err[1], proto[1],
                  chan[1], sync[0], sync[1], rep[1], spec.limits, false);
      }
    }
    fork_errno = errno;
    return child;
  });
  close(in[0]);
  close(out[1]);
  close(err[1]);
  close(proto[1]);
  close(sync[0]);
  close(rep[1]);
  if (chan[1] >= 0) close(chan[1]);
  if (pid < 0) {
    if (chan[0] >= 0) close(chan[0]);
    *error = std::string("fork: ") + strerror(fork_errno);
    close(in[1]);
    close(out[0]);
    close(err[0]);
    close(proto[0]);
    close(sync[1]);
    close(rep[0]);
    return nullptr;
  }
  p->pid_ = pid;
  p->in_fd_ = in[1];
  p->proto_fd_ = proto[0];
  p->channel_fd_ = chan[0];
  p->out_fd_ = out[0];
  p->err_fd_ = err[0];
  p->isolation_ = in_ns ? "namespaces" : "process-group";
  const long long mem = ResolveMemoryLimit(spec.limits.max_memory_bytes);
  bool v2_memory = false;
  p->cgroup_dir_ = MakePidsCgroup(spec.limits.max_processes, mem, &v2_memory);
  if (!v2_memory) p->mem_cgroup_dir_ = MakeMemoryCgroupV1(mem);
  if (!p->cgroup_dir_.empty()) {
    if (WriteSmallFile(p->cgroup_dir_ + "/cgroup.procs", std::to_string(pid))) {
      p->isolation_ += v2_memory ? "+pids-cgroup+memory-cgroup" : "+pids-cgroup";
    } else {
      p->RemoveCgroup();
    }
  }
  if (!p->mem_cgroup_dir_.empty()) {
    if (WriteSmallFile(p->mem_cgroup_dir_ + "/cgroup.procs", std::to_string(pid))) {
      p->isolation_ += "+memory-cgroup";
    } else {
      rmdir(p->mem_cgroup_dir_.c_str());
      p->mem_cgroup_dir_.clear();
    }
  }
  // Let the child go on, then learn what isolation it achieved.
  char go = 1;
  (void)!write(sync[1], &go, 1);
  close(sync[1]);
  char report = 0;
  while (read(rep[0], &report, 1) < 0 && errno == EINTR) {
  }
  close(rep[0]);
  if (in_ns && (report & kReportReadOnly)) p->isolation_ += "+readonly-fs";
  if (in_ns && !(report & kReportProc)) p->isolation_ += "(host-proc)";
  signal(SIGPIPE, SIG_IGN);
  return p;
}

SandboxProcess::~SandboxProcess() {
  if (!reaped_ && pid_ > 0) {
    Kill();
    Wait();
  }
  CloseFd(in_fd_);
  CloseFd(proto_fd_);
  CloseFd(channel_fd_);
  CloseFd(out_fd_);
  CloseFd(err_fd_);
}

void SandboxProcess::CloseInput() { CloseFd(in_fd_); }

void SandboxProcess::Kill() {
  if (reaped_ || pid_ <= 0) return;
  kill(pid_, SIGKILL);
  kill(-pid_, SIGKILL);
  if (!cgroup_dir_.empty()) {
    // cgroup v2 can kill the whole group at once; v1 needs the list.
    if (!WriteSmallFile(cgroup_dir_ + "/cgroup.kill", "1")) {
      std::ifstream procs(cgroup_dir_ + "/cgroup.procs");
      pid_t p;
      while (procs >> p) kill(p, SIGKILL);
    }
  }
}

bool SandboxProcess::PollExited() {
  if (reaped_) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    wait_status_ = status;
    RemoveCgroup();
    return true;
  }
  return false;
}

std::string SandboxProcess::Wait() {
  if (!reaped_) {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    wait_status_ = status;
    // Processes the child left behind (outside a PID namespace) go too.
    if (isolation_.rfind("namespaces", 0) != 0) kill(-pid_, SIGKILL);
    RemoveCgroup();
  }
  return DescribeExit(wait_status_);
}

void SandboxProcess::ReadOomEvents() {
  // v1: memory.oom_control has "oom_kill N"; v2: memory.events has "oom_kill N".
  for (const std::string& f : {mem_cgroup_dir_ + "/memory.oom_control", cgroup_dir_ + "/memory.events"}) {
    std::ifstream in(f);
    std::string key;
    long long n;
    while (in >> key >> n) {
      if (key == "oom_kill" && n > 0) oom_killed_ = true;
    }
  }
}

void SandboxProcess::RemoveCgroup() {
  ReadOomEvents();
  for (std::string* dir : {&cgroup_dir_, &mem_cgroup_dir_}) {
    if (dir->empty()) continue;
    for (int i = 0; i < 50; ++i) {
      if (rmdir(dir->c_str()) == 0 || errno == ENOENT) break;
      std::ifstream procs(*dir + "/cgroup.procs");
      pid_t p;
      while (procs >> p) kill(p, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    dir->clear();
  }
}

}  // namespace ax
