#!/usr/bin/env python3
"""bench/distributed: the judge through a Redis Streams broker against the local pool.

    distributed.py trivial [--count 1000] [--slots 4] [--device cpu]
    distributed.py throughput --tasks DIR [--count 10] [--variants 5] [--device cuda:0]
                              [--concurrency 4] [--workers 1,2,4]

Both start their own redis-server (--redis-server, default: on PATH) on a free
port and their own `adaexplore worker` processes, and print one line per
figure; --out FILE also writes them as JSON.

trivial: COUNT jobs whose verdict the worker already holds (one candidate,
judged once before the clock starts), so that what is timed is the broker's
path: the client's XADD, the worker's XREADGROUP, its cache lookup, the
once-only marker, the answer's XADD, XACK and XDEL, and the client's XREAD.
Prints the wall time and jobs per second; then sends SEQUENTIAL more jobs one
at a time (`eval`) and prints the per-job broker overhead with nothing queued:
the round trip less the worker's own time (`phases.broker` of each verdict).

throughput: COUNT KernelBench tasks x VARIANTS distinct Triton candidates
(bench/make_reference_candidates.py) judged with the full protocol, first by
the local pool (`batch --jobs CONCURRENCY`), then through the broker by 1, 2
and 4 workers on the same device whose --jobs add up to the same
concurrency. Every configuration starts from the same warm cache (Triton and
inductor builds, the tasks' baselines: measured once before, in a pass that
is not timed) with no verdicts, so the figures compare the judging itself.
Prints candidates per minute for each, and the broker's median overhead.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self, exe, tmp):
        self.port = free_port()
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(tmp), "--protected-mode", "no"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        sys.exit("redis-server did not start")

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Worker:
    def __init__(self, binary, url, name, device, jobs, cache, log_dir, env):
        self.log = Path(log_dir) / ("%s.log" % name)
        e = dict(env, ADAEXPLORE_CACHE_DIR=str(cache))
        self.proc = subprocess.Popen([binary, "worker", "--broker", url, "--device", device, "--name", name,
                                      "--jobs", str(jobs)], stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     env=e, start_new_session=True)

    def wait_serving(self, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "serving" in self.log.read_text():
                return
            if self.proc.poll() is not None:
                sys.exit("worker exited: " + self.log.read_text()[-2000:])
            time.sleep(0.2)
        sys.exit("worker did not start: " + self.log.read_text()[-2000:])

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def batch(binary, manifest, extra, env):
    t0 = time.time()
    p = subprocess.run([binary, "batch", str(manifest)] + extra, capture_output=True, text=True, env=env)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit("batch failed (%d): %s" % (p.returncode, p.stderr[-3000:]))
    verdicts = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return wall, verdicts, p.stderr


def overhead_ms(verdicts):
    xs = [v["phases"]["broker"] * 1000 for v in verdicts if "broker" in v.get("phases", {})]
    if not xs:
        return None
    xs.sort()
    return {"median": statistics.median(xs), "p90": xs[int(0.9 * (len(xs) - 1))], "n": len(xs)}


def trivial(args, env, tmp):
    binary = args.bin
    redis = Redis(args.redis_server, tmp)
    worker = Worker(binary, redis.url, "bench-trivial", args.device, args.slots, tmp / "cache", tmp, env)
    try:
        worker.wait_serving()
        task = ROOT / "examples" / "tasks" / "1_BiasReLUScale.py"
        cand = ROOT / "examples" / "candidates" / "1_BiasReLUScale_triton.py"
        kind = "cuda" if args.device.startswith("cuda") else "cpu"
        judge = ["--judge", redis.url, "--device", kind, "--trials", "2", "--iters", "2", "--warmup", "1"]
        first = subprocess.run([binary, "eval", str(task), str(cand), "--json"] + judge, capture_output=True,
                               text=True, env=env)
        if first.returncode != 0:
            sys.exit("eval failed: " + first.stderr[-2000:])
        manifest = tmp / "trivial.jsonl"
        manifest.write_text("".join(json.dumps({"task": str(task), "candidate": str(cand)}) + "\n"
                                    for _ in range(args.count)))
        wall, verdicts, _ = batch(binary, manifest, judge, env)
        cached = sum(1 for v in verdicts if v.get("cached"))
        res = {"figure": "broker_trivial_jobs", "jobs": len(verdicts), "cached": cached, "wall_s": wall,
               "jobs_per_s": len(verdicts) / wall, "worker_slots": args.slots}
        print("trivial jobs through the broker: %d in %.2f s (%.0f per second; %d served from the worker's cache)"
              % (len(verdicts), wall, len(verdicts) / wall, cached))
        # The overhead of one job with nothing queued: jobs one at a time.
        seq = []
        for _ in range(args.sequential):
            p = subprocess.run([binary, "eval", str(task), str(cand), "--json"] + judge, capture_output=True,
                               text=True, env=env)
            seq.append(json.loads(p.stdout.strip().splitlines()[-1]))
        ov = overhead_ms(seq)
        print("broker overhead per job, one job at a time (round trip less the worker's own time): median %.2f ms, "
              "p90 %.2f ms over %d jobs" % (ov["median"], ov["p90"], ov["n"]))
        return [res, {"figure": "broker_overhead_per_job", "overhead_ms": ov}]
    finally:
        worker.stop()
        redis.stop()


def throughput(args, env, tmp):
    binary = args.bin
    cands = tmp / "cands"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_reference_candidates.py"), args.tasks, str(cands),
                    "--variants", str(args.variants), "--limit", str(args.count)], check=True,
                   stdout=subprocess.DEVNULL)
    manifest = cands / "manifest.jsonl"
    n = sum(1 for l in manifest.read_text().splitlines() if l.strip())
    judge = ["--device", args.device]
    warm = tmp / "warm-cache"
    # The untimed pass: builds and baselines into the shared warm cache.
    t0 = time.time()
    batch(binary, manifest, judge + ["--jobs", str(args.concurrency)], dict(env, ADAEXPLORE_CACHE_DIR=str(warm)))
    warm_s = time.time() - t0
    print("warm-up pass (builds, baselines, not timed below): %.1f s" % warm_s)

    def fresh_cache(name):
        c = tmp / name
        shutil.copytree(warm, c)
        db = sqlite3.connect(str(c / "judge.sqlite"))
        db.execute("DELETE FROM verdicts")
        db.commit()
        db.close()
        return c

    results = []
    wall, verdicts, _ = batch(binary, manifest, judge + ["--jobs", str(args.concurrency)],
                              dict(env, ADAEXPLORE_CACHE_DIR=str(fresh_cache("local"))))
    ok = sum(1 for v in verdicts if v.get("status") == "ok")
    local_rate = 60 * n / wall
    results.append({"figure": "judge_throughput", "mode": "local", "concurrency": args.concurrency,
                    "candidates": n, "ok": ok, "wall_s": wall, "per_minute": local_rate})
    print("local pool, --jobs %d: %d candidates (%d ok) in %.1f s = %.1f per minute"
          % (args.concurrency, n, ok, wall, local_rate))
    for k in [int(x) for x in args.workers.split(",")]:
        if args.concurrency % k:
            print("skipping %d workers: %d slots do not split evenly" % (k, args.concurrency))
            continue
        redis = Redis(args.redis_server, tmp)
        cache = fresh_cache("remote%d" % k)
        workers = [Worker(binary, redis.url, "w%d" % i, args.device, args.concurrency // k, cache, tmp, env)
                   for i in range(k)]
        try:
            for w in workers:
                w.wait_serving()
            wall, verdicts, _ = batch(binary, manifest, ["--judge", redis.url, "--device", "cuda"
                                                         if args.device.startswith("cuda") else "cpu"],
                                      dict(env, ADAEXPLORE_CACHE_DIR=str(tmp / ("client%d" % k))))
        finally:
            for w in workers:
                w.stop()
            redis.stop()
        ok = sum(1 for v in verdicts if v.get("status") == "ok")
        rate = 60 * n / wall
        results.append({"figure": "judge_throughput", "mode": "broker", "workers": k,
                        "jobs_per_worker": args.concurrency // k, "candidates": n, "ok": ok, "wall_s": wall,
                        "per_minute": rate, "vs_local": rate / local_rate})
        print("broker, %d worker(s) x --jobs %d: %d candidates (%d ok) in %.1f s = %.1f per minute (%.3f of the "
              "local pool)" % (k, args.concurrency // k, n, ok, wall, rate, rate / local_rate))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["trivial", "throughput"])
    ap.add_argument("--bin", default=os.environ.get("ADAEXPLORE_BIN", str(ROOT / "build" / "adaexplore")))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--sequential", type=int, default=100, help="trivial: jobs sent one at a time for the overhead")
    ap.add_argument("--tasks")
    ap.add_argument("--variants", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--out")
    args = ap.parse_args()
    env = dict(os.environ)
    env.pop("ADAEXPLORE_JUDGE", None)
    with tempfile.TemporaryDirectory(prefix="ax-dist-") as d:
        tmp = Path(d)
        if args.mode == "trivial":
            args.count = args.count or 1000
            rows = trivial(args, env, tmp)
        else:
            if not args.tasks:
                sys.exit("throughput needs --tasks DIR")
            args.count = args.count or 10
            rows = throughput(args, env, tmp)
    stamp = {"date": datetime.date.today().isoformat(), "device": args.device}
    try:
        stamp["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                      capture_output=True, text=True).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        stamp["gpu"] = None
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(stamp, **r)) + "\n")


if __name__ == "__main__":
    main()
