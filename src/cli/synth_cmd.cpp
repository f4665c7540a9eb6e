#include "cli/synth_cmd.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "adapt/synth.h"
#include "judge/judge.h"
#include "llm/factory.h"
#include "llm/recorder.h"

namespace ax::cli {

namespace {

constexpr int kExitShort = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitEnvironment = 3;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "adaexplore synth: %s\n", msg.c_str());
  return code;
}

std::string DefaultDevice() {
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidia0", ec) ? "cuda:0" : "cpu";
}

bool ValidDevice(const std::string& d) {
  if (d == "cpu") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5) return false;
  for (size_t i = 5; i < d.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(d[i]))) return false;
  }
  return true;
}

}  // namespace

void RegisterSynthCommand(CLI::App& app, SynthFlags* f, CLI::App** sub) {
  CLI::App* c = app.add_subcommand("synth", "synthesise validated KernelBench-format tasks for adaptation");
  c->add_option("--out", f->out, "folder to write the tasks into (created; tasks already there are kept)")->required();
  c->add_option("--count", f->count, "tasks to keep")->required();
  auto* prop = c->add_option("--proposer", f->proposer,
                             "LLM that writes the tasks: openai:MODEL, azure:DEPLOYMENT, anthropic:MODEL, "
                             "compat:MODEL@URL, replay:FILE");
  auto* prog = c->add_flag("--programmatic", f->programmatic, "compose catalogue operators without an LLM");
  prop->excludes(prog);
  prog->excludes(prop);
  c->add_option("--seed", f->seed, "seed for sizes, operators and examples (default: random, printed)");
  c->add_option("--size", f->size, "small, medium or kernelbench (default: kernelbench on a GPU, small on the CPU)");
  c->add_option("--examples", f->examples,
                "folder of KernelBench problems for the LLM's few-shot prompt "
                "(default: ../shared/datasets/kernelbench/level1 beside the repo, else examples/tasks)");
  c->add_option("--device", f->device, "cpu or cuda:N, where tasks are validated (default: the first GPU, else cpu)");
  c->add_option("--max-attempts", f->max_attempts, "candidates to try in all (default 5 x count)");
  c->add_option("--min-ops", f->min_ops, "fewest operators per task (default 3)");
  c->add_option("--max-ops", f->max_ops, "most operators per task (default 6)");
  c->add_option("--max-output-mb", f->max_output_mb, "reject tasks whose output is larger (default 512)");
  c->add_option("--compile-timeout", f->compile_timeout, "seconds for a task to build and run (default 600)");
  c->add_option("--python", f->python, "Python interpreter with torch (default: ADAEXPLORE_PYTHON or the project's .venv)");
  c->add_option("--max-memory-mb", f->max_memory_mb, "host memory limit of the judge's worker (default: half the RAM)");
  c->add_option("--record", f->record, "also write every LLM call to FILE (replay with --proposer replay:FILE)");
  c->add_option("--llm-max-tokens", f->llm_max_tokens, "output-token limit per LLM call (default: the client's)");
  c->add_option("--prompt", f->prompt, "prompt template (default: prompts/synth.txt)");
  *sub = c;
}

int RunSynthCommand(const SynthFlags& f) {
  if (f.proposer.empty() == !f.programmatic) {
    return Fail(kExitBadInput, "give either --proposer P or --programmatic");
  }
  if (f.count < 1) return Fail(kExitBadInput, "--count must be at least 1");
  if (f.max_attempts < 0) return Fail(kExitBadInput, "--max-attempts must be positive");
  if (f.min_ops < 1 || f.max_ops < f.min_ops || f.max_ops > 12) {
    return Fail(kExitBadInput, "need 1 <= --min-ops <= --max-ops <= 12");
  }
  if (f.max_output_mb <= 0 || f.compile_timeout <= 0) {
    return Fail(kExitBadInput, "--max-output-mb and --compile-timeout must be positive");
  }
  adapt::SynthOptions o;
  o.out_dir = f.out;
  o.count = f.count;
  o.max_attempts = f.max_attempts;
  o.min_ops = f.min_ops;
  o.max_ops = f.max_ops;
  o.max_output_bytes = static_cast<long long>(f.max_output_mb * 1024 * 1024);
  o.judge.device = f.device.empty() ? DefaultDevice() : (f.device == "cuda" ? "cuda:0" : f.device);
  if (!ValidDevice(o.judge.device)) return Fail(kExitBadInput, "bad --device '" + f.device + "' (cpu, cuda or cuda:N)");
  o.judge.compile_timeout_s = f.compile_timeout;
  o.judge.time = false;
  std::string size = f.size.empty() ? (o.judge.cuda() ? "kernelbench" : "small") : f.size;
  if (Status s = adapt::ParseSizeScale(size, &o.scale); !s.ok()) return Fail(kExitBadInput, s.message());
  o.seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : (std::random_device{}() % 1000000007ULL);
  o.examples_dir = f.examples;
  if (!f.examples.empty() && !std::filesystem::is_directory(f.examples)) {
    return Fail(kExitBadInput, "--examples: no such folder: " + f.examples);
  }
  if (!f.prompt.empty() && !std::filesystem::is_regular_file(f.prompt)) {
    return Fail(kExitBadInput, "--prompt: no such file: " + f.prompt);
  }
  o.prompt_file = f.prompt;
  o.llm_max_tokens = f.llm_max_tokens;

  std::unique_ptr<llm::LlmClient> client;
  if (!f.proposer.empty()) {
    llm::RunServices services;
    if (!f.record.empty()) {
      std::unique_ptr<llm::JsonlRecorder> rec;
      if (Status s = llm::JsonlRecorder::Open(f.record, true, &rec); !s.ok()) return Fail(kExitBadInput, s.message());
      services.sink = std::move(rec);
    }
    if (Status s = llm::MakeClient(f.proposer, llm::ClientConfig{}, services, &client); !s.ok()) {
      return Fail(kExitBadInput, s.message());
    }
    o.llm = client.get();
  }

  PoolConfig cfg = DefaultPoolConfig();
  if (!f.python.empty()) cfg.python = f.python;
  cfg.devices = {o.judge.device};
  cfg.workers_per_device = 1;
  cfg.max_spawns = 0;  // the task loader runs in the reference worker only
  if (f.max_memory_mb > 0) cfg.limits.max_memory_bytes = f.max_memory_mb << 20;
  auto judge = MakeJudgePool(cfg);

  o.progress = [](const std::string& line) { std::fprintf(stderr, "synth: %s\n", line.c_str()); };
  std::fprintf(stderr, "synth: %d tasks into %s (%s, size %s, device %s, seed %llu)\n", o.count, o.out_dir.c_str(),
               client ? client->Describe().c_str() : "programmatic", adapt::SizeScaleName(o.scale),
               o.judge.device.c_str(), static_cast<unsigned long long>(o.seed));
  adapt::SynthResult r = adapt::Synthesize(o, judge.get());
  if (r.attempts > 0) std::printf("%s\n", r.Summary(o).c_str());
  switch (r.failure) {
    case adapt::SynthFailure::kNone:
      if (!r.status.ok()) return Fail(kExitShort, r.status.message());
      return 0;
    case adapt::SynthFailure::kUsage:
    case adapt::SynthFailure::kIo:
      return Fail(kExitBadInput, r.status.message());
    case adapt::SynthFailure::kEnvironment:
    case adapt::SynthFailure::kLlm:
      return Fail(kExitEnvironment, r.status.message());
  }
  return 0;
}

}  // namespace ax::cli
