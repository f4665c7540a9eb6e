#include "common/install_paths.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#ifndef ADAEXPLORE_SOURCE_DIR
#define ADAEXPLORE_SOURCE_DIR "."
#endif

namespace fs = std::filesystem;

namespace ax {

namespace {

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? std::string(v) : std::string();
}

bool IsFile(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::string CodeDir() {
  // dladdr names the shared object (the Python extension) that holds this
  // function; for code linked into the executable it may give only argv[0],
  // so the executable's own path is asked for then.
  Dl_info info{};
  std::string file;
  if (dladdr(reinterpret_cast<void*>(&CodeDir), &info) != 0 && info.dli_fname && info.dli_fname[0] == '/') {
    file = info.dli_fname;
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (file.empty() || (!ec && fs::equivalent(file, self, ec))) {
    if (ec || self.empty()) return file.empty() ? "" : fs::path(file).parent_path().string();
    file = self.string();
  }
  fs::path canon = fs::weakly_canonical(file, ec);
  return (ec ? fs::path(file) : canon).parent_path().string();
}

std::string SourceDir() { return ADAEXPLORE_SOURCE_DIR; }

std::vector<ResourceLayout> ResourceLayouts(const std::string& code_dir, const std::string& source_dir) {
  std::vector<ResourceLayout> out;
  if (!code_dir.empty()) {
    fs::path d(code_dir);
    fs::path share = d.parent_path() / "share" / "adaexplore";
    out.push_back({(share / "prompts").string(), (share / "python").string()});
    out.push_back({(d / "prompts").string(), d.parent_path().string()});
  }
  out.push_back({source_dir + "/prompts", source_dir + "/python"});
  return out;
}

namespace {

// The env variable's folder, else the first layout whose folder (member)
// holds `marker`, else the source tree's.
std::string Find(const char* env, std::string ResourceLayout::*member, const char* marker) {
  if (std::string e = Env(env); !e.empty()) return e;
  auto layouts = ResourceLayouts(CodeDir(), SourceDir());
  for (const auto& l : layouts) {
    if (IsFile(l.*member + "/" + marker)) return l.*member;
  }
  return layouts.back().*member;
}

}  // namespace

std::string PromptsDir() { return Find("ADAEXPLORE_PROMPTS_DIR", &ResourceLayout::prompts, "system.txt"); }

std::string WorkerDir() {
  return Find("ADAEXPLORE_WORKER_DIR", &ResourceLayout::worker, "adaexplore_worker/__main__.py");
}

}  // namespace ax
