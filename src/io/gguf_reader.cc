// GGUF header validation and memory-mapped file access (docs/formats.md §5.1).
// Every count and length read from the file is checked against the bytes
// left before anything is allocated or read, so a hostile file costs at most
// its own size.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>

#include "dgemma/error.h"
#include "io/gguf.h"

namespace dgemma {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kFixedHeaderBytes = 24;   // magic, version, tensor_count, kv_count
// The least bytes a key or a tensor descriptor can take (docs/formats.md
// §5.1): a key is a length, a type and at least a one-byte value; a
// descriptor is a name length, n_dims, one dimension, the type and the offset.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr uint64_t kMaxTensorNameBytes = 63;
constexpr uint32_t kMaxDims = 4;
constexpr uint32_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";

std::string hex32(uint32_t v) {
  static const char* kHex = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 28; i >= 0; i -= 4) s += kHex[(v >> i) & 15];
  return s;
}

bool known_value_type(uint32_t id) { return id <= uint32_t(GgufValueType::kF64); }

// Reads little-endian fields from the file image and reports failures as
// `<file>: <context>: <why>`.
class Reader {
 public:
  Reader(const uint8_t* bytes, uint64_t size, const std::string& source) : b_(bytes), size_(size), source_(source) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const uint8_t* here() const { return b_ + pos_; }
  void skip(uint64_t n) { pos_ += n; }

  [[noreturn]] void fail(const std::string& context, const std::string& why) const {
    throw Error(source_ + ": " + context + ": " + why);
  }

  void need(uint64_t n, const std::string& context, const std::string& what) const {
    if (n > left()) {
      fail(context, what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                        " but the file ends after " + std::to_string(left()) + " (truncated file?)");
    }
  }
  uint32_t u32(const std::string& context, const std::string& what) {
    need(4, context, what);
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | b_[pos_ + uint64_t(i)];
    pos_ += 4;
    return v;
  }
  uint64_t u64(const std::string& context, const std::string& what) {
    need(8, context, what);
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | b_[pos_ + uint64_t(i)];
    pos_ += 8;
    return v;
  }
  // A gguf_string: u64 length then the bytes, checked against the bytes left.
  std::string_view str(const std::string& context, const std::string& what) {
    const uint64_t n = u64(context, what + " length");
    if (n > left()) {
      fail(context, what + " length " + std::to_string(n) + " runs past the end of the file (" +
                        std::to_string(left()) + " bytes left; truncated file?)");
    }
    std::string_view s(reinterpret_cast<const char*>(b_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* b_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& source_;
};

std::string key_ctx(std::string_view key) { return "key " + gguf_quoted(key); }
std::string tensor_ctx(std::string_view name) { return "tensor " + gguf_quoted(name); }

// One value of type `t` at the reader's position: checks it fits (and that a
// bool is 0 or 1) and steps over it. `what` names the value in messages.
void skip_value(Reader& r, GgufValueType t, const std::string& ctx, const std::string& what) {
  if (t == GgufValueType::kString) {
    r.str(ctx, what);
    return;
  }
  const uint64_t n = gguf_scalar_bytes(t);
  r.need(n, ctx, what);
  if (t == GgufValueType::kBool && *r.here() > 1)
    r.fail(ctx, what + " has byte value " + std::to_string(*r.here()) + " (a bool must be 0 or 1)");
  r.skip(n);
}

// Steps over one string or bool element when it is well-formed; false (not
// moving) otherwise.
bool element_fits(Reader& r, GgufValueType t) {
  if (t == GgufValueType::kBool) {
    if (r.left() < 1 || *r.here() > 1) return false;
    r.skip(1);
    return true;
  }
  if (r.left() < 8) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | r.here()[i];
  if (n > r.left() - 8) return false;
  r.skip(8 + n);
  return true;
}

GgufKv read_kv(Reader& r, uint64_t index, uint64_t count) {
  const std::string pos_ctx = "header: key " + std::to_string(index + 1) + " of " + std::to_string(count);
  GgufKv kv;
  const std::string_view key = r.str(pos_ctx, "key name");
  if (key.empty()) r.fail(pos_ctx, "the key name is empty");
  const std::string ctx = key_ctx(key);
  if (key.size() > kMaxKeyBytes)
    r.fail(ctx, "the name is " + std::to_string(key.size()) + " bytes, over the limit of 65535");
  kv.key = std::string(key);
  const uint32_t type = r.u32(ctx, "value type");
  if (!known_value_type(type)) r.fail(ctx, "unknown value type " + std::to_string(type) + " (known: 0..12)");
  kv.type = GgufValueType(type);
  if (kv.type != GgufValueType::kArray) {
    kv.elem_type = kv.type;
    kv.count = 1;
    kv.data = r.here();
    const uint64_t start = r.pos();
    skip_value(r, kv.type, ctx, std::string(gguf_value_type_name(kv.type)) + " value");
    kv.nbytes = r.pos() - start;
    return kv;
  }
  const uint32_t elem = r.u32(ctx, "array element type");
  if (elem == uint32_t(GgufValueType::kArray)) r.fail(ctx, "arrays of arrays are not supported");
  if (!known_value_type(elem)) r.fail(ctx, "unknown array element type " + std::to_string(elem) + " (known: 0..12)");
  kv.elem_type = GgufValueType(elem);
  kv.count = r.u64(ctx, "array length");
  const std::string elem_name(gguf_value_type_name(kv.elem_type));
  // Bound the count by the bytes left before touching any element: a string
  // takes at least its 8-byte length.
  const uint64_t min_elem = kv.elem_type == GgufValueType::kString ? 8 : gguf_scalar_bytes(kv.elem_type);
  if (kv.count > r.left() / min_elem) {
    r.fail(ctx, "array of " + std::to_string(kv.count) + " " + elem_name + " values needs at least " +
                    (kv.count > UINT64_MAX / min_elem ? std::string("2^64") : std::to_string(kv.count * min_elem)) +
                    " bytes, but only " + std::to_string(r.left()) + " are left in the file (truncated file?)");
  }
  kv.data = r.here();
  const uint64_t start = r.pos();
  if (kv.elem_type == GgufValueType::kString || kv.elem_type == GgufValueType::kBool) {
    // Vocabularies hold hundreds of thousands of strings: step over the ones
    // that are fine without building a message; skip_value() reports the
    // first that is not.
    for (uint64_t i = 0; i < kv.count; ++i) {
      if (element_fits(r, kv.elem_type)) continue;
      skip_value(r, kv.elem_type, ctx, "element " + std::to_string(i) + " (" + elem_name + ")");
    }
  } else {
    r.skip(kv.count * min_elem);
  }
  kv.nbytes = r.pos() - start;
  return kv;
}

uint32_t read_alignment(const std::vector<GgufKv>& kvs, const Reader& r) {
  for (const GgufKv& kv : kvs) {
    if (kv.key != kAlignmentKey) continue;
    if (kv.type != GgufValueType::kU32)
      r.fail(key_ctx(kv.key), "holds " + std::string(gguf_value_type_name(kv.type)) + ", expected u32");
    uint32_t a = 0;
    for (int i = 3; i >= 0; --i) a = (a << 8) | kv.data[i];
    if (a == 0 || (a & (a - 1)) != 0)
      r.fail(key_ctx(kv.key), "alignment " + std::to_string(a) + " is not a power of two");
    return a;
  }
  return kDefaultAlignment;
}

GgufTensorInfo read_tensor_info(Reader& r, uint64_t index, uint64_t count, uint32_t alignment) {
  const std::string pos_ctx = "header: tensor " + std::to_string(index + 1) + " of " + std::to_string(count);
  GgufTensorInfo t;
  const std::string_view name = r.str(pos_ctx, "tensor name");
  if (name.empty()) r.fail(pos_ctx, "the tensor name is empty");
  const std::string ctx = tensor_ctx(name);
  if (name.size() > kMaxTensorNameBytes)
    r.fail(ctx, "the name is " + std::to_string(name.size()) + " bytes, over the limit of 63");
  t.name = std::string(name);
  const uint32_t n_dims = r.u32(ctx, "n_dims");
  if (n_dims < 1 || n_dims > kMaxDims) r.fail(ctx, "n_dims " + std::to_string(n_dims) + " is outside 1..4");
  uint64_t elems = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const std::string what = "ne[" + std::to_string(d) + "]";
    const uint64_t v = r.u64(ctx, what);
    if (v > uint64_t(INT64_MAX)) r.fail(ctx, what + " = " + std::to_string(int64_t(v)) + " is negative");
    if (v == 0) r.fail(ctx, what + " = 0 (every dimension must be at least 1)");
    if (__builtin_mul_overflow(elems, v, &elems) || elems > uint64_t(INT64_MAX))
      r.fail(ctx, "the element count overflows 64 bits at " + what + " = " + std::to_string(v));
    t.ne.push_back(int64_t(v));
  }
  const uint32_t type_id = r.u32(ctx, "type");
  // An unsupported id never becomes a GgmlType (docs/formats.md §5.2).
  const GgmlTypeTraits* traits = ggml_type_traits(type_id);
  if (!traits) {
    const std::string type_name = ggml_type_id_name(type_id);
    if (type_name.rfind("type ", 0) == 0) r.fail(ctx, "unknown ggml type id " + std::to_string(type_id));
    r.fail(ctx, "unsupported ggml type " + type_name + " (id " + std::to_string(type_id) + ")");
  }
  t.type = traits->type;
  if (t.ne[0] % traits->block_elems != 0) {
    r.fail(ctx, "ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of " + std::string(traits->name) +
                    "'s block of " + std::to_string(traits->block_elems) + " elements");
  }
  const uint64_t rows = elems / uint64_t(t.ne[0]);
  const uint64_t row_bytes = uint64_t(t.ne[0] / traits->block_elems) * uint64_t(traits->block_bytes);
  if (__builtin_mul_overflow(rows, row_bytes, &t.nbytes)) r.fail(ctx, "the byte size overflows 64 bits");
  t.offset = r.u64(ctx, "offset");
  if (t.offset % alignment != 0) {
    r.fail(ctx,
           "offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment));
  }
  return t;
}

std::string range_str(uint64_t begin, uint64_t n) {
  std::string s = "[";
  s += std::to_string(begin);
  s += ", ";
  s += n > UINT64_MAX - begin ? std::to_string(begin) + " + " + std::to_string(n) : std::to_string(begin + n);
  s += ")";
  return s;
}

// Every tensor's bytes lie inside the file and no two overlap (docs/formats.md
// §5.1: any aligned, non-overlapping order is read).
void check_data_layout(const GgufHeader& h, uint64_t file_size, const Reader& r) {
  const uint64_t data_size = file_size - h.data_offset;
  for (const GgufTensorInfo& t : h.tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      r.fail(tensor_ctx(t.name), "data " + range_str(t.offset, t.nbytes) +
                                     " (relative to the data section) runs past the end of the file: the data "
                                     "section holds " +
                                     std::to_string(data_size) + " bytes (truncated file?)");
    }
  }
  std::vector<size_t> order(h.tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return h.tensors[a].offset < h.tensors[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = h.tensors[order[i - 1]];
    const GgufTensorInfo& t = h.tensors[order[i]];
    if (t.offset < prev.offset + prev.nbytes) {
      r.fail(tensor_ctx(t.name), "data " + range_str(t.offset, t.nbytes) + " overlaps tensor " +
                                     gguf_quoted(prev.name) + " " + range_str(prev.offset, prev.nbytes));
    }
  }
}

}  // namespace

uint64_t gguf_scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16: return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32: return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: return "u8";
    case GgufValueType::kI8: return "i8";
    case GgufValueType::kU16: return "u16";
    case GgufValueType::kI16: return "i16";
    case GgufValueType::kU32: return "u32";
    case GgufValueType::kI32: return "i32";
    case GgufValueType::kF32: return "f32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kU64: return "u64";
    case GgufValueType::kI64: return "i64";
    case GgufValueType::kF64: return "f64";
  }
  return "unknown";
}

std::string gguf_quoted(std::string_view name) {
  constexpr size_t kMaxShown = 80;
  static const char* kHex = "0123456789abcdef";
  std::string s = "'";
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
      s += "\\x";
      s += kHex[c >> 4];
      s += kHex[c & 15];
    } else {
      s += char(c);
    }
  }
  if (name.size() > kMaxShown) s += "...";
  return s + "'";
}

GgufHeader parse_gguf(const uint8_t* bytes, uint64_t file_size, const std::string& source) {
  Reader r(bytes, file_size, source);
  static const std::string kHeader = "header";
  if (file_size < 4) {
    r.fail(kHeader, "file is " + std::to_string(file_size) + " bytes, too short for the GGUF magic (not a GGUF file?)");
  }
  const uint32_t magic = r.u32(kHeader, "magic");
  if (magic != kGgufMagic) r.fail(kHeader, "magic " + hex32(magic) + " is not 'GGUF' (not a GGUF file)");
  if (file_size < kFixedHeaderBytes) {
    r.fail(kHeader,
           "file is " + std::to_string(file_size) + " bytes, shorter than the 24-byte GGUF header (truncated)");
  }
  GgufHeader h;
  h.version = r.u32(kHeader, "version");
  if (h.version == 0) r.fail(kHeader, "version 0 is not a GGUF version");
  if ((h.version & 0xffff) == 0) {
    r.fail(kHeader, "version " + hex32(h.version) +
                        " reads as byte-swapped: big-endian GGUF files are not supported (versions 2 and 3 are)");
  }
  if (h.version == 1)
    r.fail(kHeader, "version 1 (32-bit counts) is not supported; re-convert the model (versions 2 and 3 are read)");
  if (h.version > 3)
    r.fail(kHeader, "version " + std::to_string(h.version) + " is newer than this reader (versions 2 and 3 are read)");
  const uint64_t tensor_count = r.u64(kHeader, "tensor_count");
  const uint64_t kv_count = r.u64(kHeader, "metadata_kv_count");
  // Bound the counts by the file's size before reserving anything.
  const uint64_t body = file_size - kFixedHeaderBytes;
  if (kv_count > body / kMinKvBytes) {
    r.fail(kHeader, "metadata_kv_count " + std::to_string(kv_count) + " cannot fit in a " + std::to_string(file_size) +
                        "-byte file (a key takes at least " + std::to_string(kMinKvBytes) + " bytes)");
  }
  if (tensor_count > (body - kv_count * kMinKvBytes) / kMinTensorInfoBytes) {
    r.fail(kHeader, "tensor_count " + std::to_string(tensor_count) + " cannot fit in a " + std::to_string(file_size) +
                        "-byte file (a tensor descriptor takes at least " + std::to_string(kMinTensorInfoBytes) +
                        " bytes)");
  }

  h.kvs.reserve(size_t(kv_count));
  std::unordered_map<std::string_view, uint64_t> seen;
  for (uint64_t i = 0; i < kv_count; ++i) {
    h.kvs.push_back(read_kv(r, i, kv_count));
    // Keys point into h.kvs' strings, which stay put: the vector was reserved.
    auto [it, inserted] = seen.emplace(h.kvs.back().key, i);
    if (!inserted) {
      r.fail(key_ctx(h.kvs.back().key),
             "appears twice (keys " + std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
    }
  }
  h.alignment = read_alignment(h.kvs, r);

  h.tensors.reserve(size_t(tensor_count));
  seen.clear();
  for (uint64_t i = 0; i < tensor_count; ++i) {
    h.tensors.push_back(read_tensor_info(r, i, tensor_count, h.alignment));
    auto [it, inserted] = seen.emplace(h.tensors.back().name, i);
    if (!inserted) {
      r.fail(tensor_ctx(h.tensors.back().name),
             "appears twice (tensors " + std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
    }
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end = r.pos();
  const uint64_t pad = (h.alignment - end % h.alignment) % h.alignment;
  if (pad > file_size - end) {
    // Only a file without tensors may end before its (empty) data section.
    if (!h.tensors.empty()) {
      r.fail(kHeader, "the data section would start at offset " + std::to_string(end + pad) + ", past the end of the " +
                          std::to_string(file_size) + "-byte file (truncated file?)");
    }
    h.data_offset = file_size;
  } else {
    h.data_offset = end + pad;
  }
  check_data_layout(h, file_size, r);
  return h;
}

// ---- GgufFile ----------------------------------------------------------------

std::shared_ptr<const GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error("cannot stat " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  f->size_ = uint64_t(st.st_size);
  if (f->size_ > 0) {
    // Read-only private mapping: nothing is read until a tensor is touched.
    void* p = ::mmap(nullptr, size_t(f->size_), PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error("cannot mmap " + path + ": " + std::strerror(e));
    f->map_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  // On a validation error the shared_ptr's destructor unmaps.
  static const uint8_t kEmpty[1] = {};
  f->header_ = parse_gguf(f->map_ ? f->map_ : kEmpty, f->size_, path);
  return f;
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_t(size_));
}

bool looks_like_gguf(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[4] = {};
  ssize_t got = 0;
  do {
    got = ::read(fd, magic, sizeof magic);
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  return got == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace dgemma
