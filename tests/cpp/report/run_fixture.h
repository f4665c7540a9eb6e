// Builds small run folders by hand with the real RunStore, mirroring what
// `adaexplore optimize`/`bench` write, so that report tests are fast and exact.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>
#include <string>

#include "common/util.h"
#include "search/run_store.h"

namespace ax::report::testing {

using nlohmann::json;

inline std::string CallRecord(const std::string& task, const std::string& purpose, const std::string& prompt,
                              const std::string& reply, int in, int out, double usd, double latency) {
  json j = {{"v", 1},
            {"time", 1700000000.0},
            {"provider", "compat"},
            {"model", "fake"},
            {"task", task},
            {"purpose", purpose},
            {"request_hash", "h"},
            {"request", {{"system", "You write fast kernels."}, {"messages", json::array({{{"role", "user"}, {"content", prompt}}})}}},
            {"reply", {{"text", reply}, {"finish_reason", "stop"}}},
            {"usage", {{"input_tokens", in}, {"output_tokens", out}, {"reasoning_tokens", 0}, {"cached_input_tokens", 0}}},
            {"cost_usd", usd},
            {"latency_s", latency},
            {"attempts", 1},
            {"ok", true},
            {"error_kind", "none"},
            {"error", ""}};
  return j.dump();
}

inline json Outcome(const std::string& status, bool correct, double speedup) {
  return {{"status", status}, {"correct", correct}, {"speedup", speedup}, {"runtime_ms", correct ? 1.0 : 0.0},
          {"error", correct ? "" : status + ": something <bad> & \"quoted\""}, {"flags", json::array()}};
}

inline json Node(int id, int parent, const std::string& kind, const std::string& source, const json& outcome) {
  return {{"id", id},         {"parent", parent},   {"kind", kind},          {"source", source},
          {"hash", kind == "root" ? "" : Sha256Hex(source)},           {"outcome", outcome},
          {"visits", 1},      {"total_reward", 0.5}, {"max_reward", 0.5},   {"reward", 0.5},
          {"note", kind == "small" ? "guidance:\nuse a bigger block" : ""}};
}

inline json Verdict(const std::string& status, bool correct, double eager, double compile, bool degenerate = false) {
  json v = {{"status", status},
            {"correct", correct},
            {"flags", degenerate ? json::array({"degenerate_task", "degenerate:zero_output_passes"}) : json::array()},
            {"error", ""},
            {"runtime_ms", correct ? json(2.0 / eager) : json(nullptr)},
            {"baseline_ms", {{"eager", 2.0}, {"compile", 1.5}}},
            {"speedup", json::object()},
            {"device", "NVIDIA H200"},
            {"judge_seconds", 1.5},
            {"task", {{"degenerate", degenerate ? json::array({"zero_output_passes"}) : json::array()}}}};
  if (correct) {
    v["speedup"]["eager"] = eager;
    if (compile > 0) v["speedup"]["compile"] = compile;
  }
  return v;
}

// The sources, with text that must be escaped in HTML.
inline std::string Src(const std::string& tag) {
  return "# " + tag + "\nimport triton\nx = '</script><script>alert(1)</script>' if 1 < 2 and 3 > 2 else \"&amp;\"\n";
}

// A bench run: alpha (found, 2.4x), beta (none, degenerate), gamma (killed
// after one step: no summary).
inline std::string MakeBenchRun(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::unique_ptr<search::RunStore> s;
  Status st = search::RunStore::Open((dir / "run.sqlite").string(), &s);
  EXPECT_TRUE(st.ok()) << st.message();
  json config = {{"proposer", "compat:fake@http://127.0.0.1:1/v1"}, {"steps", 3}, {"search", "mcts"}, {"seed", 7},
                 {"device", "cuda:0"}, {"tolerance", "strict"}, {"backend", "triton"}, {"memory", ""},
                 {"params", json::object()},
                 {"tasks", json::array({{{"name", "alpha"}, {"path", "/t/alpha.py"}, {"hash", "a"}},
                                        {{"name", "beta"}, {"path", "/t/beta.py"}, {"hash", "b"}},
                                        {{"name", "gamma"}, {"path", "/t/gamma.py"}, {"hash", "c"}}})}};
  s->PutMeta("config", config.dump());
  s->PutMeta("seed", "7");
  // alpha
  json an = json::array({Node(0, -1, "root", "class Model: pass\n", {{"status", ""}}),
                         Node(1, 0, "large", Src("a1"), Outcome("compile_error", false, 0)),
                         Node(2, 0, "large", Src("a2"), Outcome("ok", true, 1.5)),
                         Node(3, 2, "small", Src("a3"), Outcome("ok", true, 2.5))});
  s->PutTree("alpha", {{"params", json::object()}, {"nodes", an}});
  s->PutVerdict("alpha", Sha256Hex(Src("a1")), Verdict("compile_error", false, 0, 0).dump());
  s->PutVerdict("alpha", Sha256Hex(Src("a2")), Verdict("ok", true, 1.5, 0.9).dump());
  s->PutVerdict("alpha", Sha256Hex(Src("a3")), Verdict("ok", true, 2.5, 1.2).dump());
  s->PutCall("alpha", 0, "propose", "h0", CallRecord("alpha", "propose", "PROMPT-A1 write a kernel", "```python\n" + Src("a1") + "```", 100, 10, 0.01, 1.0));
  s->PutCall("alpha", 1, "propose", "h1", CallRecord("alpha", "propose", "PROMPT-A2 write another", "ok", 200, 20, 0.02, 2.0));
  s->PutCall("alpha", 2, "revise", "h2", CallRecord("alpha", "revise", "PROMPT-A3 revise", "bigger block", 300, 30, 0.03, 3.0));
  s->PutCall("alpha", 3, "tune", "h3", CallRecord("alpha", "tune", "PROMPT-A3 tune", "edits", 400, 40, 0.04, 4.0));
  s->PutCall("alpha", 4, "tune-retry", "h4", CallRecord("alpha", "tune-retry", "PROMPT-A3 retry", "edits", 500, 50, 0.05, 5.0));
  json asum = {{"task", "alpha"}, {"status", "found"}, {"steps", 3}, {"best_node", 3}, {"llm_calls", 0},
               {"judged", 3}, {"wall_s", 12.5}, {"runtime_ms", 0.8333}, {"speedup", {{"eager", 2.4}, {"compile", 1.1}}},
               {"baseline_ms", {{"eager", 2.0}, {"compile", 1.5}}}, {"flags", json::array()}, {"device", "NVIDIA H200"}};
  s->PutTask("alpha", "found", asum);
  fs::create_directories(dir / "alpha");
  std::ofstream(dir / "alpha" / "best.py") << "# adaexplore: best kernel for alpha\n" << Src("a3");
  // beta: degenerate, nothing correct
  json bn = json::array({Node(0, -1, "root", "class Model: pass\n", {{"status", ""}}),
                         Node(1, 0, "large", Src("b1"), Outcome("mismatch", false, 0)),
                         Node(2, 0, "large", Src("b1"), Outcome("duplicate", false, 0))});
  bn[2]["hash"] = Sha256Hex(Src("b1"));
  s->PutTree("beta", {{"params", json::object()}, {"nodes", bn}});
  s->PutVerdict("beta", Sha256Hex(Src("b1")), Verdict("mismatch", false, 0, 0, true).dump());
  s->PutCall("beta", 0, "propose", "h0", CallRecord("beta", "propose", "PROMPT-B1", "x", 1000, 100, 0.1, 1.0));
  s->PutCall("beta", 1, "propose", "h1", CallRecord("beta", "propose", "PROMPT-B2", "x", 1000, 100, 0.1, 1.0));
  json bsum = {{"task", "beta"}, {"status", "none"}, {"steps", 2}, {"best_node", -1}, {"llm_calls", 0},
               {"judged", 1}, {"wall_s", 7.5}};
  s->PutTask("beta", "none", bsum);
  // gamma: killed after one step (tree and call, no summary)
  json gn = json::array({Node(0, -1, "root", "class Model: pass\n", {{"status", ""}}),
                         Node(1, 0, "large", Src("g1"), Outcome("ok", true, 0.8))});
  s->PutTree("gamma", {{"params", json::object()}, {"nodes", gn}});
  s->PutVerdict("gamma", Sha256Hex(Src("g1")), Verdict("ok", true, 0.8, 0.5).dump());
  s->PutCall("gamma", 0, "propose", "h0", CallRecord("gamma", "propose", "PROMPT-G1", "x", 10, 1, 0.001, 0.5));
  return dir.string();
}

// A one-task optimize run (best.py at the top of the folder).
inline std::string MakeOptimizeRun(const std::filesystem::path& dir, const std::string& task, double eager,
                                   double compile) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::unique_ptr<search::RunStore> s;
  EXPECT_TRUE(search::RunStore::Open((dir / "run.sqlite").string(), &s).ok());
  json config = {{"proposer", "replay:x"}, {"steps", 1}, {"search", "mcts"}, {"device", "cuda:0"},
                 {"tolerance", "strict"}, {"tasks", json::array({{{"name", task}, {"path", "/t/x.py"}}})}};
  s->PutMeta("config", config.dump());
  json n = json::array({Node(0, -1, "root", "ref\n", {{"status", ""}}), Node(1, 0, "large", Src(task), Outcome("ok", true, eager))});
  s->PutTree(task, {{"nodes", n}});
  s->PutVerdict(task, Sha256Hex(Src(task)), Verdict("ok", true, eager, compile).dump());
  s->PutCall(task, 0, "propose", "h", CallRecord(task, "propose", "P", "R", 50, 5, 0.5, 1));
  json sum = {{"task", task}, {"status", "found"}, {"steps", 1}, {"best_node", 1}, {"wall_s", 3.0},
              {"speedup", {{"eager", eager}, {"compile", compile}}}, {"baseline_ms", {{"eager", 2.0}, {"compile", 1.5}}}};
  s->PutTask(task, "found", sum);
  std::ofstream(dir / "best.py") << "# best\n" << Src(task);
  return dir.string();
}

inline std::filesystem::path TempDir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() /
           ("axreport-" + name + "-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace ax::report::testing
