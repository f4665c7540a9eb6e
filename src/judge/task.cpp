#include "judge/task.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/util.h"

namespace fs = std::filesystem;

namespace ax {

namespace {

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

long NumericPrefix(const std::string& name) {
  size_t i = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i ? std::stol(name.substr(0, i)) : -1;
}

// Finds "ID_*.py" (or "ID.py") in a level folder.
Status FindProblem(const fs::path& dir, const std::string& id, std::string* out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error("no such KernelBench level folder: " + dir.string());
  std::vector<std::string> hits;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".py") continue;
    if (name == id + ".py" || name.rfind(id + "_", 0) == 0) hits.push_back(e.path().string());
  }
  if (hits.empty()) return Status::Error("no problem " + id + " in " + dir.string());
  if (hits.size() > 1) return Status::Error("problem id " + id + " is ambiguous in " + dir.string());
  *out = hits[0];
  return Status::Ok();
}

// True when some line is `<keyword> <name>` followed by one of `after`
// (spaces allowed between), like "class Model(" or "def get_inputs(".
bool DefinesAtLineStart(const std::string& src, const std::string& keyword, const std::string& name,
                        const std::string& after) {
  size_t pos = 0;
  while (pos < src.size()) {
    size_t end = src.find('\n', pos);
    if (end == std::string::npos) end = src.size();
    size_t i = pos;
    auto skip_space = [&] {
      while (i < end && (src[i] == ' ' || src[i] == '\t')) ++i;
    };
    skip_space();
    if (src.compare(i, keyword.size(), keyword) == 0) {
      i += keyword.size();
      size_t before = i;
      skip_space();
      if (i > before && src.compare(i, name.size(), name) == 0) {
        i += name.size();
        skip_space();
        if (i < end && after.find(src[i]) != std::string::npos) return true;
      }
    }
    pos = end + 1;
  }
  return false;
}

}  // namespace

Status ReadTask(const std::string& path, TaskRef* out) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (!fs::is_regular_file(p, ec)) return Status::Error("task file not found: " + path);
  auto src = ReadFile(p.string());
  if (!src) return Status::Error("cannot read task file: " + path);
  if (!DefinesAtLineStart(*src, "class", "Model", "(:")) {
    return Status::Error("not a KernelBench task (no class Model): " + path);
  }
  if (!DefinesAtLineStart(*src, "def", "get_inputs", "(")) {
    return Status::Error("not a KernelBench task (no get_inputs): " + path);
  }
  if (!DefinesAtLineStart(*src, "def", "get_init_inputs", "(")) {
    return Status::Error("not a KernelBench task (no get_init_inputs): " + path);
  }
  out->path = p.lexically_normal().string();
  out->name = p.stem().string();
  out->source = *src;
  out->hash = Sha256Hex(*src);
  return Status::Ok();
}

Status ResolveTasks(const std::string& spec, std::vector<TaskRef>* out) {
  std::error_code ec;
  std::vector<std::string> files;
  if (spec.rfind("kernelbench:", 0) == 0) {
    // kernelbench:ROOT:LEVEL:ID
    std::string rest = spec.substr(12);
    size_t c2 = rest.rfind(':');
    size_t c1 = (c2 == std::string::npos || c2 == 0) ? std::string::npos : rest.rfind(':', c2 - 1);
    if (c1 == std::string::npos || c1 == 0 || c1 >= c2) {
      return Status::Error("expected kernelbench:ROOT:LEVEL:ID, got " + spec);
    }
    std::string root = rest.substr(0, c1), level = rest.substr(c1 + 1, c2 - c1 - 1), id = rest.substr(c2 + 1);
    if (!IsNumber(level) || !IsNumber(id)) return Status::Error("LEVEL and ID must be numbers in " + spec);
    std::string file;
    Status s = FindProblem(fs::path(root) / ("level" + level), id, &file);
    if (!s.ok()) return s;
    files.push_back(file);
  } else if (fs::is_regular_file(spec, ec)) {
    files.push_back(spec);
  } else if (fs::is_directory(spec, ec)) {
    for (auto& e : fs::directory_iterator(spec, ec)) {
      if (e.is_regular_file() && e.path().extension() == ".py" && e.path().filename().string()[0] != '_') {
        files.push_back(e.path().string());
      }
    }
    if (files.empty()) return Status::Error("no .py task files in " + spec);
    std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
      std::string na = fs::path(a).filename().string(), nb = fs::path(b).filename().string();
      long ia = NumericPrefix(na), ib = NumericPrefix(nb);
      if (ia != ib) return ia < ib;
      return na < nb;
    });
  } else {
    fs::path p(spec);
    std::string id = p.filename().string();
    if (IsNumber(id) && fs::is_directory(p.parent_path(), ec)) {
      std::string file;
      Status s = FindProblem(p.parent_path(), id, &file);
      if (!s.ok()) return s;
      files.push_back(file);
    } else {
      return Status::Error("no such task file or folder: " + spec);
    }
  }
  for (auto& f : files) {
    TaskRef t;
    Status s = ReadTask(f, &t);
    if (!s.ok()) return s;
    out->push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace ax
