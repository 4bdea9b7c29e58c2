#pragma once
// A GGUF writer for outputs larger than memory (docs/formats.md §5.1, §5.5):
// keys and tensors are declared first, begin() writes the header and the
// tensor descriptors, then tensor bytes are written in any order and in
// pieces, straight to their place in the file. The layout is the one
// llama.cpp's reader insists on: version 3, data section aligned to 32, each
// tensor at the running sum of the earlier tensors' sizes padded to 32, in
// declaration order. The file is written under PATH.tmp.<pid> and renamed into
// place by finish(), which first checks that every byte of every tensor was
// written. Errors are dgemma::Error naming the key, tensor or file.
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

  // Lays the tensors out and writes the header to `path`.tmp.<pid>.
  void begin(const std::string& path);
  // Bytes [offset, offset + n) of a declared tensor; pieces may come in any
  // order but not twice.
  void write(const std::string& name, const void* data, uint64_t n, uint64_t offset = 0);
  // Checks every non-sparse tensor is complete, syncs and renames into place.
  void finish();

  uint64_t nbytes(const std::string& name) const;
  // Where the tensor's data starts, relative to the data section.
  uint64_t offset(const std::string& name) const;
  uint64_t data_offset() const { return data_start_; }  // valid after begin()

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
    std::map<uint64_t, uint64_t> written;  // disjoint written ranges: begin -> end
  };
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
  std::string path_, tmp_;
  int fd_ = -1;
  bool finished_ = false;
  uint64_t data_start_ = 0, data_bytes_ = 0;
};

}  // namespace dgemma
