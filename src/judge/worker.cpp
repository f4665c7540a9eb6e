#include "judge/worker.h"

#include "judge/device_spec.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/util.h"

namespace ax {

std::map<std::string, std::string> WorkerEnvironment(const WorkerConfig& cfg) {
  std::map<std::string, std::string> env;
  // Only what a Python/CUDA process needs to find its libraries and devices.
  static const char* kPass[] = {"PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
                                "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CC", "CXX",
                                "TORCH_CUDA_ARCH_LIST", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                                "VIRTUAL_ENV", "TRITON_PTXAS_PATH", "MAX_JOBS"};
  for (const char* k : kPass) {
    if (const char* v = getenv(k)) env[k] = v;
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  env["PYTHONPATH"] = cfg.worker_dir;
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  env["PYTHONUNBUFFERED"] = "1";
  env["PYTHONHASHSEED"] = "0";
  env["HOME"] = cfg.scratch;
  env["TMPDIR"] = cfg.scratch;
  env["ADAEXPLORE_PROTO_FD"] = "3";
  env["ADAEXPLORE_CHANNEL_FD"] = "4";
  env["ADAEXPLORE_THREADS"] = std::to_string(cfg.threads);
  env["OMP_NUM_THREADS"] = std::to_string(cfg.threads);
  env["TRITON_CACHE_DIR"] = cfg.cache_dir + "/triton";
  env["TORCHINDUCTOR_CACHE_DIR"] = cfg.cache_dir + "/inductor";
  env["TORCH_EXTENSIONS_DIR"] = cfg.extensions_dir.empty() ? cfg.cache_dir + "/torch_extensions" : cfg.extensions_dir;
  env["XDG_CACHE_HOME"] = cfg.scratch + "/.cache";
  if (cfg.device == "cpu") {
    env["TRITON_INTERPRET"] = "1";
    env["CUDA_VISIBLE_DEVICES"] = "";
  } else {
    // cuda:N -> the worker sees exactly one GPU, as cuda:0.
    std::string idx = PhysicalGpuId(cfg.device);
    env["CUDA_VISIBLE_DEVICES"] = idx;
  }
  return env;
}

std::unique_ptr<Worker> Worker::Start(const WorkerConfig& cfg, std::string* error) {
  std::unique_ptr<Worker> w(new Worker());
  w->cfg_ = cfg;
  SpawnSpec spec;
  spec.argv = {cfg.python, "-s", "-m", "adaexplore_worker", cfg.role};
  spec.env = WorkerEnvironment(cfg);
  spec.cwd = cfg.scratch;
  spec.writable = {cfg.scratch, cfg.cache_dir};
  spec.limits = cfg.limits;
  spec.channel = true;
  w->proc_ = SandboxProcess::Spawn(spec, error);
  if (!w->proc_) return nullptr;
  return w;
}

Worker::~Worker() { Kill(); }

bool SendFdOver(int sock, int fd, std::string* error) {
  if (sock < 0) {
    *error = "no descriptor channel";
    return false;
  }
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof ctl;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1) {
    *error = std::string("sending a descriptor to the worker failed: ") + strerror(errno);
    return false;
  }
  return true;
}

int RecvFdOver(int sock, double timeout_s, std::string* error) {
  if (sock < 0) {
    *error = "no descriptor channel";
    return -1;
  }
  pollfd pfd{sock, POLLIN, 0};
  int pr;
  do {
    pr = poll(&pfd, 1, static_cast<int>(timeout_s * 1000));
  } while (pr < 0 && errno == EINTR);
  if (pr <= 0) {
    *error = "no descriptor arrived within " + std::to_string(timeout_s) + " s";
    return -1;
  }
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof ctl;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  int fd = -1;
  for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fd < 0) {
        fd = got;
      } else {
        close(got);  // one descriptor per message; extras are dropped
      }
    }
  }
  if (fd < 0) *error = n > 0 ? "a message on the descriptor channel carried no descriptor" : "the descriptor channel closed";
  return fd;
}

bool Worker::SendFd(int fd, std::string* error) { return SendFdOver(proc_ ? proc_->channel_fd() : -1, fd, error); }

int Worker::RecvFd(double timeout_s, std::string* error) {
  return RecvFdOver(proc_ ? proc_->channel_fd() : -1, timeout_s, error);
}

int Worker::DrainFds() {
  int dropped = 0;
  std::string ignored;
  while (proc_ && proc_->channel_fd() >= 0) {
    pollfd pfd{proc_->channel_fd(), POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN)) break;
    int fd = RecvFd(0, &ignored);
    if (fd < 0) break;
    close(fd);
    ++dropped;
  }
  return dropped;
}

void Worker::Kill() {
  if (!proc_) return;
  if (!proc_->Reaped()) {
    proc_->Kill();
    proc_->Wait();
  }
  alive_ = false;
}

void Worker::Absorb(const char* data, size_t n) {
  output_total_ += n;
  output_.append(data, n);
  if (output_.size() > 2 * cfg_.output_keep_bytes) {
    output_.erase(0, output_.size() - cfg_.output_keep_bytes);
  }
}

std::string Worker::OutputTail() const {
  if (output_.size() <= cfg_.output_keep_bytes) return output_;
  return output_.substr(output_.size() - cfg_.output_keep_bytes);
}

Reply Worker::WaitReady(double timeout_s, const std::atomic<bool>* cancel) {
  Reply r = ReadLine(Deadlines{timeout_s, 0}, cancel);
  if (r.kind == Reply::kOk && !r.body.value("ok", false)) {
    r.kind = Reply::kProtocol;
    r.detail = "worker did not start: " + r.body.dump();
  }
  return r;
}

Reply Worker::Request(const nlohmann::json& req, const Deadlines& deadlines) {
  Reply r;
  if (!alive_) {
    r.kind = Reply::kDied;
    r.detail = "worker is not running";
    return r;
  }
  std::string line = req.dump() + "\n";
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = write(proc_->in_fd(), line.data() + off, line.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      // The worker is gone; let ReadLine collect how it ended.
      break;
    }
    off += static_cast<size_t>(n);
  }
  return ReadLine(deadlines);
}

Reply Worker::ReadLine(const Deadlines& d, const std::atomic<bool>* cancel) {
  Reply r;
  const double t0 = NowSeconds();
  const bool split = d.build_s > 0;
  // The call's deadline moves on by the time spent in builds; the builds
  // have their own budget.
  double deadline = t0 + d.call_s;
  double building_since = -1;
  char buf[65536];
  bool proto_open = true, out_open = true, err_open = true;
  while (true) {
    size_t nl = proto_buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = proto_buf_.substr(0, nl);
      proto_buf_.erase(0, nl + 1);
      const double now = NowSeconds();
      r.seconds = now - t0;
      try {
        r.body = nlohmann::json::parse(line);
        if (!r.body.is_object()) throw std::runtime_error("not an object");
        r.kind = Reply::kOk;
      } catch (const std::exception& e) {
        Kill();
        r.kind = Reply::kProtocol;
        r.detail = "worker sent a malformed reply: " + FirstLine(line, 200);
        return r;
      }
      // A build event is not the reply (only the candidate role sends them).
      if (r.body.contains("event") && !r.body.contains("ok")) {
        const std::string state = r.body.value("event", "") == "build" && r.body["state"].is_string()
                                      ? r.body["state"].get<std::string>() : "";
        if (state == "start" && building_since < 0) {
          building_since = now;
        } else if (state == "end" && building_since >= 0) {
          r.build_seconds += now - building_since;
          if (split) deadline += now - building_since;
          building_since = -1;
        }
        r.body = nlohmann::json();
        continue;
      }
      if (building_since >= 0) r.build_seconds += now - building_since;
      return r;
    }
    if (!proto_open) {
      // The protocol channel closed: the worker died. Drain what it printed
      // (its last words are often the reason), for at most half a second.
      Kill();
      const double drain_until = NowSeconds() + 0.5;
      while ((out_open || err_open) && NowSeconds() < drain_until && output_total_ <= cfg_.output_flood_bytes) {
        struct pollfd pf[2];
        int np = 0, io = -1, ie = -1;
        if (out_open) { pf[np] = {proc_->out_fd(), POLLIN, 0}; io = np++; }
        if (err_open) { pf[np] = {proc_->err_fd(), POLLIN, 0}; ie = np++; }
        int pr = poll(pf, np, 50);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        for (int k = 0; k < np; ++k) {
          if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t n = read(pf[k].fd, buf, sizeof buf);
          if (n > 0) {
            Absorb(buf, static_cast<size_t>(n));
          } else if (!(n < 0 && errno == EINTR)) {
            (k == io ? out_open : err_open) = false;
          }
        }
        (void)ie;
      }
      r.kind = Reply::kDied;
      r.detail = proc_->Wait();
      if (proc_->oom_killed()) r.detail += " after reaching its memory limit";
      r.seconds = NowSeconds() - t0;
      return r;
    }
    // Without a PID namespace a dead worker's children may hold the pipes
    // open: notice the worker's own exit too.
    if (proc_->PollExited()) {
      proto_open = false;
      continue;
    }
    double now = NowSeconds();
    if (cancel && cancel->load()) {
      Kill();
      r.kind = Reply::kDied;
      r.detail = "stopped while starting";
      r.seconds = now - t0;
      return r;
    }
    const bool building = split && building_since >= 0;
    const double build_used = r.build_seconds + (building_since >= 0 ? now - building_since : 0);
    if (building ? build_used >= d.build_s : now >= deadline) {
      Kill();
      r.kind = Reply::kTimeout;
      char msg[160];
      if (!split) {
        std::snprintf(msg, sizeof msg, "no reply within %g s", d.call_s);
      } else if (building) {
        std::snprintf(msg, sizeof msg, "its builds ran longer than %.0f s", d.build_s);
      } else {
        std::snprintf(msg, sizeof msg, "the call ran longer than %.3g s (builds excluded: %.1f s)", d.call_s,
                      build_used);
      }
      r.detail = msg;
      r.build_seconds = build_used;
      r.seconds = now - t0;
      return r;
    }
    const double next = building ? now + (d.build_s - build_used) : deadline;
    struct pollfd fds[3];
    int nfds = 0;
    int idx_proto = -1, idx_out = -1, idx_err = -1;
    if (proto_open) { fds[nfds] = {proc_->proto_fd(), POLLIN, 0}; idx_proto = nfds++; }
    if (out_open) { fds[nfds] = {proc_->out_fd(), POLLIN, 0}; idx_out = nfds++; }
    if (err_open) { fds[nfds] = {proc_->err_fd(), POLLIN, 0}; idx_err = nfds++; }
    int wait_ms = static_cast<int>(std::min(cancel ? 100.0 : 1000.0, (next - now) * 1000.0)) + 1;
    int pr = poll(fds, nfds, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      Kill();
      r.kind = Reply::kDied;
      r.detail = std::string("poll: ") + strerror(errno);
      return r;
    }
    auto drain = [&](int idx, int fd, bool& open, bool is_proto) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) return;
        open = false;
        return;
      }
      if (is_proto) {
        proto_buf_.append(buf, static_cast<size_t>(n));
      } else {
        Absorb(buf, static_cast<size_t>(n));
      }
    };
    drain(idx_proto, proc_->proto_fd(), proto_open, true);
    drain(idx_out, proc_->out_fd(), out_open, false);
    drain(idx_err, proc_->err_fd(), err_open, false);
    if (output_total_ > cfg_.output_flood_bytes) {
      Kill();
      r.kind = Reply::kFlood;
      r.detail = "printed more than " + std::to_string(cfg_.output_flood_bytes >> 20) + " MiB of output";
      r.seconds = NowSeconds() - t0;
      return r;
    }
    if (proto_buf_.size() > (64u << 20)) {
      Kill();
      r.kind = Reply::kProtocol;
      r.detail = "worker reply larger than 64 MiB";
      return r;
    }
  }
}

}  // namespace ax
