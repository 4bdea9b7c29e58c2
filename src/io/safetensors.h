#pragma once
// safetensors reading and writing (docs/formats.md §1). Files are memory-mapped
// and tensors are exposed as zero-copy views; nothing is read until touched.
// Every rejection rule of docs/formats.md §1.5 / §1.6 raises dgemma::Error with a
// message naming the file, the tensor (where there is one) and the reason.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"

namespace dgemma {

class GgufFile;
class GgufModelFiles;

inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;   // docs/formats.md §1.4
inline constexpr int64_t kMaxSafetensorsDim = int64_t(1) << 48;  // schema limit

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;  // a GGUF block tensor: kF32, its values' type
  std::vector<int64_t> shape;
  // Byte offsets, end exclusive: relative to the data buffer (safetensors),
  // from the start of the file (GGUF).
  uint64_t begin = 0;
  uint64_t end = 0;
  // GGUF tensors of a ggml block type (docs/formats.md §5.2): the type; the
  // bytes [begin, end) are its blocks. Plain tensors (safetensors, GGUF F32,
  // F16, BF16): nullopt.
  std::optional<GgmlType> ggml_blocks;
  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// Result of parsing and validating a header against the size of the data
// buffer that follows it. Tensors are sorted by data offset.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__
  uint64_t data_offset = 0;                                   // 8 + N
};

// Validates the 8-byte length prefix and the header of a whole file image
// (`bytes` is the start of the file, `file_size` its full length; only the
// prefix and header bytes are read). `source` names the file in errors.
SafetensorsHeader parse_safetensors(const uint8_t* bytes, uint64_t file_size, const std::string& source);

// A read-only typed view into mapped (or owned) memory.
struct TensorView {
  const TensorInfo* info = nullptr;
  const uint8_t* data = nullptr;
  std::string_view file;  // path of the file holding it (for messages)

  const std::string& name() const { return info->name; }
  DType dtype() const { return info->dtype; }
  const std::vector<int64_t>& shape() const { return info->shape; }
  int64_t numel() const { return info->numel(); }
  uint64_t nbytes() const { return info->nbytes(); }
  // True when `data` is aligned for the element type (writers need not align;
  // consumers that want typed pointers must copy otherwise, docs/formats.md §1.3).
  bool aligned() const;
  // Element i converted to float (float dtypes only).
  float at_f32(size_t i) const { return load_as_f32(dtype(), data, i); }
};

class SafetensorsFile {
 public:
  // Maps and validates the file. Throws dgemma::Error.
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const TensorInfo* find(std::string_view name) const;
  TensorView view(const TensorInfo& info) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* map_ = nullptr;
  uint64_t size_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// All tensors of a checkpoint folder: `model.safetensors.index.json` when
// present (sharded, docs/formats.md §1.6), else every `*.safetensors` file in the
// folder. Names are unique across files.
class TensorStore {
 public:
  static TensorStore open_dir(const std::string& dir);
  static TensorStore open_file(const std::string& path);
  // The tensors of a GGUF model (io/gguf.h), each under rename(GGUF name)
  // (the checkpoint layer's name table; an empty result, or an empty
  // `rename`, keeps the GGUF name), shapes in dgemma's order (GGUF's ne
  // reversed). F32/F16/BF16 tensors get that dtype; block tensors dtype kF32
  // and ggml_blocks set. begin/end are file offsets, TensorView::file the
  // part's path, dir() the first part's folder. Two tensors renamed alike
  // are an error naming both (docs/formats.md §5.1).
  static TensorStore open_gguf(const GgufModelFiles& files, const std::function<std::string(std::string_view)>& rename);

  const std::string& dir() const { return dir_; }
  // nullptr when absent.
  const TensorView* find(std::string_view name) const;
  const std::vector<std::string>& names() const { return names_; }  // sorted
  // The safetensors files (empty for a GGUF store).
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  // The GGUF parts (empty for a safetensors store).
  const std::vector<std::shared_ptr<const GgufFile>>& gguf_parts() const { return gguf_parts_; }

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  // A GGUF store's parts (kept mapped) and the descriptors its views point
  // at, shared so that copies of the store stay valid.
  std::vector<std::shared_ptr<const GgufFile>> gguf_parts_;
  std::shared_ptr<const std::vector<TensorInfo>> gguf_infos_;
  std::map<std::string, TensorView, std::less<>> views_;
  std::vector<std::string> names_;
};

// One tensor of a safetensors file as its header lists it.
struct SafetensorsEntry {
  std::string_view name;
  DType dtype;
  const std::vector<int64_t>* shape;
  uint64_t nbytes;
};

// The start of a safetensors file holding `entries` back to back in this
// order from data offset 0: the 8-byte little-endian header length, then the
// header as compact JSON like the reference writer's (`__metadata__` first,
// its keys sorted), padded with spaces to a multiple of 8 bytes so that every
// tensor starts naturally aligned (docs/formats.md §1.3). The one header
// builder of both writers. Throws dgemma::Error naming `path` when the header
// would exceed kMaxSafetensorsHeader.
std::string safetensors_head(const std::vector<SafetensorsEntry>& entries,
                             std::vector<std::pair<std::string, std::string>> metadata, const std::string& path);

// Writes a safetensors file the way the reference Rust writer does
// (docs/formats.md §1.3): tensors laid out contiguously from offset 0 (the format
// allows no gaps) in order of descending dtype (the reference enum order,
// roughly descending alignment) then name, header keys in that same order with
// `__metadata__` first, compact JSON padded with spaces to a multiple of 8.
// Because the data buffer starts at a multiple of 8 and big dtypes come first,
// every tensor is naturally aligned. Sparse tensors are left as holes in the
// file (no disk blocks, reads as zeros): used for the full-size fake
// checkpoint. The file is written under a temporary name and renamed into
// place, so a reader never sees a half-written file. Throws dgemma::Error on a
// duplicate name, a bad shape or an I/O failure.
class SafetensorsWriter {
 public:
  void add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data);
  void add_f32(std::string name, std::vector<int64_t> shape, const float* data) {
    add(std::move(name), DType::kF32, std::move(shape), data);
  }
  void add_sparse(std::string name, DType dtype, std::vector<int64_t> shape);
  void set_metadata(std::string key, std::string value);
  void write(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // empty for sparse
    bool sparse = false;
    uint64_t nbytes = 0;
  };
  std::vector<Pending> pending_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace dgemma
