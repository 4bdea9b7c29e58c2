#pragma once
// A GGUF writer for outputs larger than memory (docs/formats.md §5.1, §5.5):
// keys and tensors are declared first, begin() writes the header and the
// tensor descriptors, then tensor bytes are written in any order and in
// pieces, straight to their place in the file. The layout is the one
// llama.cpp's reader insists on: version 3, data section aligned to 32, each
// tensor at the running sum of the earlier tensors' sizes padded to 32, in
// declaration order. The file is written under PATH.tmp.<pid> and renamed into
// place by finish(), which first checks that every byte of every tensor was
// written; optionally split over several files. Errors are dgemma::Error
// naming the key, tensor or file.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_types.h"
#include "io/gguf.h"

namespace dgemma {

class GgufStreamWriter {
 public:
  static constexpr uint32_t kAlignment = 32;

  GgufStreamWriter() = default;
  ~GgufStreamWriter();
  GgufStreamWriter(const GgufStreamWriter&) = delete;
  GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;

  // Keys, written in the order added. A key may be added once;
  // general.alignment is refused (the writer always aligns to 32).
  void add_u8(const std::string& key, uint8_t v) { add_scalar(key, GgufValueType::kU8, v, 1); }
  void add_i8(const std::string& key, int8_t v) { add_scalar(key, GgufValueType::kI8, uint8_t(v), 1); }
  void add_u16(const std::string& key, uint16_t v) { add_scalar(key, GgufValueType::kU16, v, 2); }
  void add_i16(const std::string& key, int16_t v) { add_scalar(key, GgufValueType::kI16, uint16_t(v), 2); }
  void add_u32(const std::string& key, uint32_t v) { add_scalar(key, GgufValueType::kU32, v, 4); }
  void add_i32(const std::string& key, int32_t v) { add_scalar(key, GgufValueType::kI32, uint32_t(v), 4); }
  void add_u64(const std::string& key, uint64_t v) { add_scalar(key, GgufValueType::kU64, v, 8); }
  void add_i64(const std::string& key, int64_t v) { add_scalar(key, GgufValueType::kI64, uint64_t(v), 8); }
  void add_f32(const std::string& key, float v);
  void add_f64(const std::string& key, double v);
  void add_bool(const std::string& key, bool v) { add_scalar(key, GgufValueType::kBool, v ? 1 : 0, 1); }
  void add_string(const std::string& key, std::string_view v);
  // Arrays of one element type.
  void add_array(const std::string& key, const std::vector<uint8_t>& v);
  void add_array(const std::string& key, const std::vector<int8_t>& v);
  void add_array(const std::string& key, const std::vector<uint16_t>& v);
  void add_array(const std::string& key, const std::vector<int16_t>& v);
  void add_array(const std::string& key, const std::vector<uint32_t>& v);
  void add_array(const std::string& key, const std::vector<int32_t>& v);
  void add_array(const std::string& key, const std::vector<uint64_t>& v);
  void add_array(const std::string& key, const std::vector<int64_t>& v);
  void add_array(const std::string& key, const std::vector<float>& v);
  void add_array(const std::string& key, const std::vector<double>& v);
  void add_array(const std::string& key, const std::vector<bool>& v);
  void add_array(const std::string& key, const std::vector<std::string>& v);
  void add_array(const std::string& key, const std::vector<std::string_view>& v);

  // A tensor: its GGUF name (1..63 bytes), type and dimensions innermost
  // first (ne[0] a multiple of the type's block). A sparse tensor need not be
  // written: its unwritten bytes stay holes in the file (no disk blocks,
  // reading as zeros), for full-size fakes.
  void declare(const std::string& name, GgmlType type, std::vector<int64_t> ne);
  void declare_sparse(const std::string& name, GgmlType type, std::vector<int64_t> ne);

  // Splits the output (docs/formats.md §5.1) into parts PREFIX-00001-of-0000N
  // .gguf ... for begin("PREFIX.gguf"): tensors in declaration order, a new
  // part whenever the next tensor would take a part's data (padded) past
  // `max_part_bytes` (a larger tensor gets a part of its own). Part 1 holds
  // every key, the later parts only split.no, split.count and
  // split.tensors.count. Called before begin(); without it one file is
  // written.
  void split(uint64_t max_part_bytes);

  // Lays the tensors out and writes the header(s) to PATH.tmp.<pid>.
  void begin(const std::string& path);
  // Bytes [offset, offset + n) of a declared tensor; pieces may come in any
  // order but not twice.
  void write(const std::string& name, const void* data, uint64_t n, uint64_t offset = 0);
  // Checks every non-sparse tensor is complete, syncs and renames into place.
  void finish();

  uint64_t nbytes(const std::string& name) const;
  // Where the tensor's data starts, relative to its part's data section.
  uint64_t offset(const std::string& name) const;
  // After begin(): the files written (one unless split), and where the first
  // one's data section starts.
  std::vector<std::string> paths() const;
  uint64_t data_offset() const { return parts_.empty() ? 0 : parts_.front().data_start; }

 private:
  struct Key {
    std::string name;
    std::string bytes;  // type id (and array head) then the value, encoded
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0, offset = 0;
    bool sparse = false;
    size_t part = 0;
    std::map<uint64_t, uint64_t> written;  // disjoint written ranges: begin -> end
  };
  struct Part {
    std::string path, tmp;
    int fd = -1;
    bool renamed = false;  // by finish(); until then the destructor removes tmp
    uint64_t data_start = 0, data_bytes = 0;
    size_t first = 0, count = 0;  // its tensors: tensors_[first, first + count)
  };
  std::string part_head(size_t index) const;
  bool started() const { return !parts_.empty(); }
  void add_key(const std::string& key, std::string bytes);
  void add_scalar(const std::string& key, GgufValueType type, uint64_t bits, int n);
  template <class T>
  void add_numbers(const std::string& key, GgufValueType type, const std::vector<T>& v, int n);
  void declare_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, bool sparse);
  Tensor& tensor(const std::string& name);
  const Tensor& tensor(const std::string& name) const;

  std::vector<Key> keys_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::vector<Part> parts_;
  uint64_t max_part_bytes_ = 0;  // 0: one file
  bool finished_ = false;
};

}  // namespace dgemma
