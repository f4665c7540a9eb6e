// Small helpers over the operating system and strings: file contents,
// hashing, temporary folders and the monotonic clock.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ax {

// Whole file as a string, or nullopt when it cannot be read.
std::optional<std::string> ReadFile(const std::string& path);
bool WriteFile(const std::string& path, const std::string& data);

// Hex SHA-256 of the bytes.
std::string Sha256Hex(const std::string& data);

// Creates a fresh, private (0700) directory under `parent`; empty on failure.
std::string MakeTempDir(const std::string& parent, const std::string& prefix);
// Removes a tree; ignores errors.
void RemoveTree(const std::string& path);

// Seconds on the monotonic clock.
inline double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string Trim(const std::string& s);
// The first line of s, without trailing whitespace, at most `limit` chars.
std::string FirstLine(const std::string& s, size_t limit = 300);

// Statistics over a sample (which is copied and sorted).
struct Stats {
  size_t n = 0;
  double median = 0, mean = 0, stdev = 0, min = 0, max = 0, p10 = 0, p90 = 0;
};
Stats ComputeStats(std::vector<double> v);

}  // namespace ax
