#pragma once
// Where layer-by-layer calibration keeps every sequence's hidden states
// between layers (docs/formats.md §3.5): in memory, or in a scratch file when
// they would not fit (read and written one sequence at a time, so resident
// memory holds one sequence). Values are kept as computed (fp32), so the
// layers see exactly what a whole-model pass would give them.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dgemma {

class HiddenStateStore {
 public:
  // Sequences of `rows[i]` rows of `width` floats each; `scratch_dir` empty:
  // in memory, else a file in that folder (removed by the destructor).
  HiddenStateStore(std::vector<int64_t> rows, int64_t width, const std::string& scratch_dir);
  ~HiddenStateStore();
  HiddenStateStore(const HiddenStateStore&) = delete;
  HiddenStateStore& operator=(const HiddenStateStore&) = delete;

  size_t size() const { return rows_.size(); }
  void put(size_t i, const Tensor& x);
  Tensor get(size_t i) const;
  bool on_disk() const { return fd_ >= 0; }
  uint64_t bytes() const { return total_ * 4; }

 private:
  void check(size_t i) const;
  std::vector<int64_t> rows_;
  std::vector<uint64_t> offset_;  // in floats
  int64_t width_;
  uint64_t total_ = 0;
  std::vector<Tensor> memory_;
  int fd_ = -1;
  std::string path_;
};

}  // namespace dgemma
