#pragma once
// A safetensors writer for outputs larger than memory: every tensor is
// declared first (name, dtype, shape), the header is written, then tensor
// bytes are written in any order and in pieces, straight to their place in
// the file. Same layout rules as SafetensorsWriter (docs/formats.md §1.3):
// contiguous data, tensors ordered by descending element size then name so
// that each is naturally aligned, header padded with spaces to a multiple of
// 8. The file is written under a temporary name and renamed into place by
// finish(), which also checks every byte of every tensor was written.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace dgemma {

class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter() = default;
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  void declare(const std::string& name, DType dtype, std::vector<int64_t> shape);
  void set_metadata(std::string key, std::string value);
  // Lays the tensors out and writes the header to `path`.tmp.<pid>.
  void begin(const std::string& path);
  // Bytes [offset, offset + n) of a declared tensor.
  void write(const std::string& name, const void* data, uint64_t n, uint64_t offset = 0);
  void finish();

  uint64_t nbytes(const std::string& name) const;
  uint64_t total_bytes() const { return data_bytes_; }

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes = 0, offset = 0, written = 0;
  };
  const Entry& entry(const std::string& name) const;
  std::map<std::string, Entry> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t data_start_ = 0, data_bytes_ = 0;
};

}  // namespace dgemma
