#pragma once
// GGUF reading (docs/formats.md §5.1): llama.cpp's single-file format of
// keys, tensor descriptors and tensor data. Files are memory-mapped; keys and
// tensors are views into the mapping, nothing is copied. Every rejection
// raises dgemma::Error naming the file and the key or tensor at fault.
//
// Shapes: GGUF lists a tensor's dimensions innermost first (ne[0] is the
// contiguous row length); TensorInfo::shape of the store holds them reversed,
// in dgemma's row-major order, so a GGUF [ne0 = K, ne1 = N] weight is
// dgemma's [N, K] matrix with no data movement.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_types.h"

namespace dgemma {

// The value types of GGUF keys (ids as stored).
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);  // "u32", "array", ...
// Bytes of one value of a fixed-size type; 0 for string and array.
uint64_t gguf_scalar_bytes(GgufValueType t);

// A key or tensor name from a file, for messages: in single quotes, bytes
// outside printable ASCII (and quotes, backslashes) as \xNN, cut after 80.
std::string gguf_quoted(std::string_view name);

// One key and its value, as a view into the file's bytes.
struct GgufKv {
  std::string key;
  GgufValueType type = GgufValueType::kU8;       // kArray for arrays
  GgufValueType elem_type = GgufValueType::kU8;  // arrays: the element type (never kArray)
  uint64_t count = 1;                            // arrays: elements; scalars: 1
  // The value's first byte (arrays: the first element's); a string starts
  // with its u64 length. Little-endian and possibly unaligned.
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;  // bytes of the value (arrays: all elements)
};

// One tensor descriptor. `ne` innermost first, as stored.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
};

// The parsed front of a GGUF file, validated against the file's size.
struct GgufHeader {
  uint32_t version = 0;
  uint32_t alignment = 32;  // general.alignment, or 32
  uint64_t data_offset = 0;
  std::vector<GgufKv> kvs;              // in file order
  std::vector<GgufTensorInfo> tensors;  // in file order
};

// Parses and validates a whole file image (`bytes` is the start of the file,
// `file_size` its length). `source` names the file in errors. Never reads
// outside [bytes, bytes + file_size) and never allocates more than the file's
// size can justify, whatever the counts claim.
GgufHeader parse_gguf(const uint8_t* bytes, uint64_t file_size, const std::string& source);

// Typed access to keys: each getter names the file and key in its error
// when the key is missing or holds another type. Integer getters accept any
// integer type whose value fits; number() also accepts floats.
class GgufKeys {
 public:
  GgufKeys(const std::vector<GgufKv>* kvs, std::string source);
  const GgufKv* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }
  int64_t integer(std::string_view key) const;
  double number(std::string_view key) const;
  bool boolean(std::string_view key) const;
  std::string_view string(std::string_view key) const;
  // Arrays (a scalar is not an array here).
  std::vector<int64_t> integers(std::string_view key) const;
  std::vector<float> floats(std::string_view key) const;
  std::vector<bool> booleans(std::string_view key) const;
  std::vector<std::string_view> strings(std::string_view key) const;
  const std::string& source() const { return source_; }

 private:
  const std::vector<GgufKv>* kvs_;
  std::map<std::string, size_t, std::less<>> index_;
  std::string source_;
};

class GgufFile {
 public:
  // Maps and validates the file. Throws dgemma::Error.
  static std::shared_ptr<const GgufFile> open(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  const GgufHeader& header() const { return header_; }
  GgufKeys keys() const { return GgufKeys(&header_.kvs, path_); }
  // The first byte of a tensor's data.
  const uint8_t* data(const GgufTensorInfo& t) const { return map_ + header_.data_offset + t.offset; }

 private:
  GgufFile() = default;
  std::string path_;
  const uint8_t* map_ = nullptr;
  uint64_t size_ = 0;
  GgufHeader header_;
};

// A model in one GGUF file or split over several (NAME-00001-of-0000N.gguf,
// docs/formats.md §5.1): given any one part, opens all and checks that they
// belong together. Keys come from the first part.
class GgufModelFiles {
 public:
  static GgufModelFiles open(const std::string& path);
  const std::vector<std::shared_ptr<const GgufFile>>& parts() const { return parts_; }
  GgufKeys keys() const { return parts_.front()->keys(); }
  const std::string& path() const { return parts_.front()->path(); }

 private:
  std::vector<std::shared_ptr<const GgufFile>> parts_;
};

// True when the file at `path` starts with the GGUF magic (for choosing a
// loader; false for a missing or unreadable file).
bool looks_like_gguf(const std::string& path);

}  // namespace dgemma
