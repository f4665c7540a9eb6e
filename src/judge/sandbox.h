// Sandbox: starts an untrusted program as an isolated child process.
//
// Where the OS allows (root, or a kernel that permits it) the child gets new
// PID, network and mount namespaces: it sees only its own processes under a
// fresh /proc, has no network (only a loopback that is down), and killing its
// first process ends every process it started, however it tried to escape.
// Everywhere it gets its own session and process group, resource limits
// (open files, processes, file size, no core dumps), a scratch directory as
// its working directory, and dies with its parent. A pids cgroup caps the
// number of processes when one can be made (root's RLIMIT_NPROC is not
// enforced by the kernel). Root's capabilities are dropped before exec.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ax {

struct SandboxLimits {
  long max_open_files = 4096;
  long max_processes = 512;
  long long max_file_bytes = 64LL << 30;
  long long max_memory_bytes = 0;  // memory cgroup limit: 0 half the machine's RAM, < 0 none
  bool namespaces = true;
};

struct SpawnSpec {
  std::vector<std::string> argv;             // argv[0] is resolved on PATH when not absolute
  std::map<std::string, std::string> env;   // the child's whole environment
  std::string cwd;                           // scratch directory
  // With namespaces, the whole file system is read-only for the child except
  // these folders (and separate mounts such as /dev and /dev/shm).
  std::vector<std::string> writable;
  SandboxLimits limits;
  // A Unix socket (SOCK_SEQPACKET) to the parent as the child's fd 4, for
  // passing file descriptors (docs/worker-protocol.md, "descriptor channel").
  bool channel = false;
};

// One descriptor per message over a descriptor channel (a Unix socket).
// SendFdOver keeps the caller's fd open; RecvFdOver waits at most timeout_s
// and returns -1 (saying why) when nothing arrives, closing any extras.
// Defined in worker.cpp.
bool SendFdOver(int sock, int fd, std::string* error);
int RecvFdOver(int sock, double timeout_s, std::string* error);

// A started child. Descriptors are the parent's ends of the pipes:
// in (child's stdin), proto (child's fd 3), out and err (child's 1 and 2).
class SandboxProcess {
 public:
  ~SandboxProcess();
  static std::unique_ptr<SandboxProcess> Spawn(const SpawnSpec& spec, std::string* error);

  pid_t pid() const { return pid_; }
  int in_fd() const { return in_fd_; }
  int proto_fd() const { return proto_fd_; }
  int out_fd() const { return out_fd_; }
  int err_fd() const { return err_fd_; }
  int channel_fd() const { return channel_fd_; }  // -1 without a channel
  // "namespaces+readonly-fs+pids-cgroup", "process-group", ...
  const std::string& isolation() const { return isolation_; }

  void CloseInput();
  // SIGKILL to the child, its process group and its cgroup; idempotent.
  void Kill();
  // Reaps the child (blocking) and returns a description of how it ended,
  // e.g. "exited with code 3" or "killed by signal 11 (Segmentation fault)".
  std::string Wait();
  bool Reaped() const { return reaped_; }
  // True when the kernel killed a process of the child's for exceeding the
  // memory limit (known once the child has been reaped).
  bool oom_killed() const { return oom_killed_; }
  // Non-blocking check; true once the child has ended (and is reaped).
  bool PollExited();

 private:
  SandboxProcess() = default;
  void RemoveCgroup();
  void ReadOomEvents();

  pid_t pid_ = -1;
  int in_fd_ = -1, proto_fd_ = -1, out_fd_ = -1, err_fd_ = -1, channel_fd_ = -1;
  std::string isolation_;
  std::string cgroup_dir_;      // pids (and on cgroup v2 also memory)
  std::string mem_cgroup_dir_;  // memory, on cgroup v1
  bool reaped_ = false;
  bool oom_killed_ = false;
  int wait_status_ = 0;
};

// Describes a waitpid status in words.
std::string DescribeExit(int status);

// Removes the empty folders under base named w<pid>_<n> whose pid no longer
// runs: the cgroups of a judge killed outright, which never removes its
// workers' (they die with it). A folder still holding a process (rmdir
// refuses it), or whose pid runs, stays. A process sweeps each cgroup root
// at its first spawn there.
void SweepStaleCgroups(const std::string& base);

// Looks a program up on PATH; returns it unchanged when it has a slash.
std::string ResolveOnPath(const std::string& prog);

}  // namespace ax
