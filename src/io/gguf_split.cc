// A GGUF model in one file or split over several (docs/formats.md §5.1):
// PREFIX-00001-of-0000N.gguf ... PREFIX-0000N-of-0000N.gguf, each a complete
// GGUF file, tied together by the keys split.no, split.count and
// split.tensors.count.
#include <sys/stat.h>

#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "dgemma/error.h"
#include "io/gguf.h"

namespace dgemma {
namespace {

constexpr std::string_view kSplitNo = "split.no";
constexpr std::string_view kSplitCount = "split.count";
constexpr std::string_view kSplitTensors = "split.tensors.count";
constexpr int64_t kMaxSplitCount = 99999;  // five digits in the file name

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The parts of a split file name: PREFIX-NNNNN-of-MMMMM.gguf.
struct SplitName {
  std::string prefix;
  int no = 0;  // 1-based, from the name
  int count = 0;
};

bool all_digits(std::string_view s) {
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return !s.empty();
}

bool parse_split_name(const std::string& path, SplitName* out) {
  constexpr std::string_view kTail = ".gguf";
  // "-NNNNN-of-MMMMM.gguf" is 20 characters.
  constexpr size_t kSuffix = 1 + 5 + 4 + 5 + 5;
  if (path.size() <= kSuffix) return false;
  const std::string_view s(path);
  const std::string_view suffix = s.substr(s.size() - kSuffix);
  if (suffix[0] != '-' || suffix.substr(6, 4) != "-of-" || suffix.substr(15) != kTail) return false;
  if (!all_digits(suffix.substr(1, 5)) || !all_digits(suffix.substr(10, 5))) return false;
  out->prefix = std::string(s.substr(0, s.size() - kSuffix));
  out->no = std::stoi(std::string(suffix.substr(1, 5)));
  out->count = std::stoi(std::string(suffix.substr(10, 5)));
  return true;
}

std::string split_path(const std::string& prefix, int no, int count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", no, count);
  return prefix + buf;
}

// split.no / split.count / split.tensors.count of one part, range-checked.
int64_t split_key(const GgufKeys& keys, std::string_view key, int64_t lo, int64_t hi) {
  const int64_t v = keys.integer(key);
  if (v < lo || v > hi) {
    throw Error(keys.source() + ": key " + gguf_quoted(key) + ": value " + std::to_string(v) + " is outside " +
                std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

}  // namespace

GgufModelFiles GgufModelFiles::open(const std::string& path) {
  GgufModelFiles files;
  auto given = GgufFile::open(path);
  const GgufKeys given_keys = given->keys();
  if (!given_keys.has(kSplitCount)) {
    files.parts_.push_back(std::move(given));
    return files;
  }
  const int64_t count = split_key(given_keys, kSplitCount, 1, kMaxSplitCount);
  const int64_t given_no = split_key(given_keys, kSplitNo, 0, count - 1);
  if (count == 1) {
    files.parts_.push_back(std::move(given));
    return files;
  }
  SplitName name;
  if (!parse_split_name(path, &name)) {
    throw Error(path + ": key 'split.count' says the model is split over " + std::to_string(count) +
                " files, but the file name does not end in -NNNNN-of-MMMMM.gguf, so the other parts cannot be found");
  }
  if (name.count != count || name.no != given_no + 1) {
    throw Error(path + ": the file name says part " + std::to_string(name.no) + " of " + std::to_string(name.count) +
                ", but its keys say part " + std::to_string(given_no + 1) + " of " + std::to_string(count) +
                " (split.no " + std::to_string(given_no) + ", split.count " + std::to_string(count) + ")");
  }

  std::map<std::string, std::string, std::less<>> part_of;  // tensor -> part path
  int64_t total = 0;
  int64_t expected_total = -1;
  for (int no = 1; no <= int(count); ++no) {
    const std::string part_path = split_path(name.prefix, no, int(count));
    std::shared_ptr<const GgufFile> part;
    if (no == given_no + 1) {
      part = given;
    } else {
      if (!is_regular_file(part_path)) {
        throw Error(path + ": part " + std::to_string(no) + " of " + std::to_string(count) + " is missing (" +
                    part_path + ")");
      }
      part = GgufFile::open(part_path);
    }
    const GgufKeys keys = part->keys();
    const int64_t part_count = split_key(keys, kSplitCount, 1, kMaxSplitCount);
    if (part_count != count) {
      throw Error(part_path + ": key 'split.count' is " + std::to_string(part_count) + ", but " + path + " says " +
                  std::to_string(count));
    }
    const int64_t part_no = split_key(keys, kSplitNo, 0, count - 1);
    if (part_no != no - 1) {
      throw Error(part_path + ": key 'split.no' is " + std::to_string(part_no) + ", expected " +
                  std::to_string(no - 1) + " for part " + std::to_string(no) + " of " + std::to_string(count));
    }
    const int64_t tensors = split_key(keys, kSplitTensors, 0, std::numeric_limits<int32_t>::max());
    if (expected_total < 0) {
      expected_total = tensors;
    } else if (tensors != expected_total) {
      throw Error(part_path + ": key 'split.tensors.count' is " + std::to_string(tensors) + ", but part 1 says " +
                  std::to_string(expected_total));
    }
    for (const GgufTensorInfo& t : part->header().tensors) {
      auto [it, inserted] = part_of.emplace(t.name, part_path);
      if (!inserted) throw Error(part_path + ": tensor " + gguf_quoted(t.name) + " is also in " + it->second);
    }
    total += int64_t(part->header().tensors.size());
    files.parts_.push_back(std::move(part));
  }
  if (total != expected_total) {
    throw Error(files.parts_.front()->path() + ": key 'split.tensors.count' is " + std::to_string(expected_total) +
                ", but the " + std::to_string(count) + " parts hold " + std::to_string(total) + " tensors");
  }
  return files;
}

}  // namespace dgemma
