// The streaming GGUF writer (docs/formats.md §5.1 for the layout rules it
// follows, §5.5 for how `dgemma quantize` uses it).
#include "io/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "dgemma/error.h"

namespace dgemma {
namespace {

constexpr uint32_t kVersion = 3;
constexpr size_t kMaxKeyBytes = 65535;
constexpr size_t kMaxNameBytes = 63;

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}

void put_string(std::string& out, std::string_view s) {
  put_le(out, s.size(), 8);
  out.append(s);
}

std::string type_head(GgufValueType t) {
  std::string s;
  put_le(s, uint32_t(t), 4);
  return s;
}

std::string array_head(GgufValueType elem, uint64_t count) {
  std::string s = type_head(GgufValueType::kArray);
  put_le(s, uint32_t(elem), 4);
  put_le(s, count, 8);
  return s;
}

uint64_t padded(uint64_t n) {
  return (n + GgufStreamWriter::kAlignment - 1) / GgufStreamWriter::kAlignment * GgufStreamWriter::kAlignment;
}

void pwrite_all(int fd, const uint8_t* p, uint64_t n, uint64_t at, const std::string& path) {
  uint64_t done = 0;
  while (done < n) {
    const size_t chunk = size_t(std::min<uint64_t>(n - done, uint64_t(1) << 30));
    const ssize_t w = ::pwrite(fd, p + done, chunk, off_t(at + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
    done += uint64_t(w);
  }
}

std::string prefix() { return "GgufStreamWriter: "; }

}  // namespace

GgufStreamWriter::~GgufStreamWriter() {
  for (const Part& part : parts_) {
    if (part.fd >= 0) ::close(part.fd);
    if (!part.renamed && !part.tmp.empty()) ::unlink(part.tmp.c_str());
  }
}

// ---- keys --------------------------------------------------------------------

void GgufStreamWriter::add_key(const std::string& key, std::string bytes) {
  if (started() || finished_) throw Error(prefix() + "key " + gguf_quoted(key) + " added after begin()");
  if (key.empty()) throw Error(prefix() + "a key name is empty");
  if (key.size() > kMaxKeyBytes)
    throw Error(prefix() + "key " + gguf_quoted(key) + ": the name is " + std::to_string(key.size()) +
                " bytes, over the limit of 65535");
  if (key == "general.alignment")
    throw Error(prefix() + "key 'general.alignment': the writer always aligns to 32 and does not take this key");
  if (!key_index_.emplace(key, keys_.size()).second) throw Error(prefix() + "key " + gguf_quoted(key) + " added twice");
  keys_.push_back({key, std::move(bytes)});
}

void GgufStreamWriter::add_scalar(const std::string& key, GgufValueType type, uint64_t bits, int n) {
  std::string s = type_head(type);
  put_le(s, bits, n);
  add_key(key, std::move(s));
}

void GgufStreamWriter::add_f32(const std::string& key, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  add_scalar(key, GgufValueType::kF32, bits, 4);
}

void GgufStreamWriter::add_f64(const std::string& key, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, 8);
  add_scalar(key, GgufValueType::kF64, bits, 8);
}

void GgufStreamWriter::add_string(const std::string& key, std::string_view v) {
  std::string s = type_head(GgufValueType::kString);
  put_string(s, v);
  add_key(key, std::move(s));
}

template <class T>
void GgufStreamWriter::add_numbers(const std::string& key, GgufValueType type, const std::vector<T>& v, int n) {
  std::string s = array_head(type, v.size());
  s.reserve(s.size() + v.size() * size_t(n));
  for (const T& x : v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof(T));  // the value's bits (a little-endian host, like the readers)
    put_le(s, bits, n);
  }
  add_key(key, std::move(s));
}

void GgufStreamWriter::add_array(const std::string& key, const std::vector<uint8_t>& v) {
  add_numbers(key, GgufValueType::kU8, v, 1);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<int8_t>& v) {
  add_numbers(key, GgufValueType::kI8, v, 1);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<uint16_t>& v) {
  add_numbers(key, GgufValueType::kU16, v, 2);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<int16_t>& v) {
  add_numbers(key, GgufValueType::kI16, v, 2);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<uint32_t>& v) {
  add_numbers(key, GgufValueType::kU32, v, 4);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<int32_t>& v) {
  add_numbers(key, GgufValueType::kI32, v, 4);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<uint64_t>& v) {
  add_numbers(key, GgufValueType::kU64, v, 8);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<int64_t>& v) {
  add_numbers(key, GgufValueType::kI64, v, 8);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<float>& v) {
  add_numbers(key, GgufValueType::kF32, v, 4);
}
void GgufStreamWriter::add_array(const std::string& key, const std::vector<double>& v) {
  add_numbers(key, GgufValueType::kF64, v, 8);
}

void GgufStreamWriter::add_array(const std::string& key, const std::vector<bool>& v) {
  std::string s = array_head(GgufValueType::kBool, v.size());
  for (bool b : v) s.push_back(b ? '\1' : '\0');
  add_key(key, std::move(s));
}

void GgufStreamWriter::add_array(const std::string& key, const std::vector<std::string_view>& v) {
  std::string s = array_head(GgufValueType::kString, v.size());
  for (std::string_view x : v) put_string(s, x);
  add_key(key, std::move(s));
}

void GgufStreamWriter::add_array(const std::string& key, const std::vector<std::string>& v) {
  std::string s = array_head(GgufValueType::kString, v.size());
  for (const std::string& x : v) put_string(s, x);
  add_key(key, std::move(s));
}

// ---- tensors -----------------------------------------------------------------

void GgufStreamWriter::declare(const std::string& name, GgmlType type, std::vector<int64_t> ne) {
  declare_tensor(name, type, std::move(ne), false);
}

void GgufStreamWriter::declare_sparse(const std::string& name, GgmlType type, std::vector<int64_t> ne) {
  declare_tensor(name, type, std::move(ne), true);
}

void GgufStreamWriter::declare_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, bool sparse) {
  const std::string ctx = prefix() + "tensor " + gguf_quoted(name) + ": ";
  if (started() || finished_) throw Error(ctx + "declared after begin()");
  if (name.empty() || name.size() > kMaxNameBytes)
    throw Error(ctx + "the name is " + std::to_string(name.size()) + " bytes (must be 1..63)");
  if (ne.empty() || ne.size() > 4) throw Error(ctx + std::to_string(ne.size()) + " dimensions (must be 1..4)");
  const GgmlTypeTraits& tr = ggml_traits(type);
  uint64_t elems = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] < 1) throw Error(ctx + "ne[" + std::to_string(i) + "] = " + std::to_string(ne[i]) + " (must be >= 1)");
    if (__builtin_mul_overflow(elems, uint64_t(ne[i]), &elems) || elems > uint64_t(INT64_MAX))
      throw Error(ctx + "the element count overflows 64 bits");
  }
  if (ne[0] % tr.block_elems != 0)
    throw Error(ctx + "ne[0] = " + std::to_string(ne[0]) + " is not a multiple of " + std::string(tr.name) +
                "'s block of " + std::to_string(tr.block_elems) + " elements");
  Tensor t;
  t.name = name;
  t.type = type;
  const uint64_t rows = elems / uint64_t(ne[0]);
  if (__builtin_mul_overflow(rows, ggml_row_bytes(type, ne[0]), &t.nbytes) || t.nbytes > UINT64_MAX / 2)
    throw Error(ctx + "the byte size overflows 64 bits");
  t.ne = std::move(ne);
  t.sparse = sparse;
  if (!tensor_index_.emplace(name, tensors_.size()).second) throw Error(ctx + "declared twice");
  tensors_.push_back(std::move(t));
}

GgufStreamWriter::Tensor& GgufStreamWriter::tensor(const std::string& name) {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) throw Error(prefix() + "tensor " + gguf_quoted(name) + " was not declared");
  return tensors_[it->second];
}

const GgufStreamWriter::Tensor& GgufStreamWriter::tensor(const std::string& name) const {
  return const_cast<GgufStreamWriter*>(this)->tensor(name);
}

uint64_t GgufStreamWriter::nbytes(const std::string& name) const { return tensor(name).nbytes; }
uint64_t GgufStreamWriter::offset(const std::string& name) const { return tensor(name).offset; }

std::vector<std::string> GgufStreamWriter::paths() const {
  std::vector<std::string> out;
  for (const Part& part : parts_) out.push_back(part.path);
  return out;
}

// ---- the files ---------------------------------------------------------------

void GgufStreamWriter::split(uint64_t max_part_bytes) {
  if (started() || finished_) throw Error(prefix() + "split() called after begin()");
  if (max_part_bytes == 0) throw Error(prefix() + "split(): the part size must be at least 1 byte");
  max_part_bytes_ = max_part_bytes;
}

// The header of part `index`: the fixed header, the keys (part 1: every key,
// later parts: only the split keys), the descriptors with packed offsets in
// declaration order, zero padding to the alignment (docs/formats.md §5.1).
std::string GgufStreamWriter::part_head(size_t index) const {
  const Part& part = parts_[index];
  std::vector<std::pair<std::string_view, std::string>> keys;
  if (index == 0)
    for (const Key& k : keys_) keys.emplace_back(k.name, k.bytes);
  if (max_part_bytes_ > 0) {
    std::string no = type_head(GgufValueType::kU16), count = type_head(GgufValueType::kU16),
                total = type_head(GgufValueType::kI32);
    put_le(no, index, 2);
    put_le(count, parts_.size(), 2);
    put_le(total, tensors_.size(), 4);
    keys.emplace_back("split.no", std::move(no));
    keys.emplace_back("split.count", std::move(count));
    keys.emplace_back("split.tensors.count", std::move(total));
  }
  std::string head = "GGUF";
  put_le(head, kVersion, 4);
  put_le(head, part.count, 8);
  put_le(head, keys.size(), 8);
  for (const auto& [name, bytes] : keys) {
    put_string(head, name);
    head += bytes;
  }
  for (size_t i = part.first; i < part.first + part.count; ++i) {
    const Tensor& t = tensors_[i];
    put_string(head, t.name);
    put_le(head, t.ne.size(), 4);
    for (int64_t d : t.ne) put_le(head, uint64_t(d), 8);
    put_le(head, uint32_t(t.type), 4);
    put_le(head, t.offset, 8);
  }
  head.append(size_t(padded(head.size()) - head.size()), '\0');
  return head;
}

void GgufStreamWriter::begin(const std::string& path) {
  if (started() || finished_) throw Error(prefix() + "begin() called twice");
  // Packed layout: each tensor of a part at the padded running sum, in
  // declaration order.
  std::vector<Part> parts(1);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    Tensor& t = tensors_[i];
    const uint64_t size = padded(t.nbytes);
    Part* part = &parts.back();
    if (max_part_bytes_ > 0 && part->count > 0 &&
        (part->data_bytes > max_part_bytes_ || size > max_part_bytes_ - part->data_bytes)) {
      parts.emplace_back();
      part = &parts.back();
      part->first = i;
    }
    t.part = parts.size() - 1;
    t.offset = part->data_bytes;
    if (__builtin_add_overflow(part->data_bytes, size, &part->data_bytes))
      throw Error(prefix() + "the tensors' total size overflows 64 bits (" + path + ")");
    ++part->count;
  }
  if (max_part_bytes_ > 0) {
    for (const char* key : {"split.no", "split.count", "split.tensors.count"})
      if (key_index_.count(key)) throw Error(prefix() + "key '" + key + "' is the writer's own when splitting");
    if (parts.size() > 99999) throw Error(prefix() + std::to_string(parts.size()) + " parts, more than 99999");
    if (tensors_.size() > size_t(INT32_MAX)) throw Error(prefix() + "too many tensors for split.tensors.count");
    if (path.size() < 5 || path.compare(path.size() - 5, 5, ".gguf") != 0)
      throw Error(prefix() + "a split output's path must end in .gguf (got " + path + ")");
    const std::string stem = path.substr(0, path.size() - 5);
    for (size_t i = 0; i < parts.size(); ++i) {
      char tail[48];
      std::snprintf(tail, sizeof tail, "-%05zu-of-%05zu.gguf", i + 1, parts.size());
      parts[i].path = stem + tail;
    }
  } else {
    parts.front().path = path;
  }
  parts_ = std::move(parts);

  for (size_t i = 0; i < parts_.size(); ++i) {
    Part& part = parts_[i];
    const std::string head = part_head(i);
    part.data_start = head.size();
    part.tmp = part.path + ".tmp." + std::to_string(::getpid());
    part.fd = ::open(part.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (part.fd < 0) throw Error("cannot create " + part.tmp + ": " + std::strerror(errno));
    // Sizing first leaves every byte not written a hole reading as zero: the
    // padding, and the unwritten parts of sparse tensors.
    if (::ftruncate(part.fd, off_t(part.data_start + part.data_bytes)) != 0)
      throw Error("cannot size " + part.tmp + ": " + std::strerror(errno));
    pwrite_all(part.fd, reinterpret_cast<const uint8_t*>(head.data()), head.size(), 0, part.tmp);
  }
}

void GgufStreamWriter::write(const std::string& name, const void* data, uint64_t n, uint64_t offset) {
  if (!started() || finished_)
    throw Error(prefix() + "write of tensor " + gguf_quoted(name) + " outside begin()..finish()");
  Tensor& t = tensor(name);
  const std::string ctx = prefix() + "tensor " + gguf_quoted(name) + ": ";
  if (offset > t.nbytes || n > t.nbytes - offset)
    throw Error(ctx + std::to_string(n) + " bytes at " + std::to_string(offset) + " run past its " +
                std::to_string(t.nbytes) + " bytes");
  if (n == 0) return;
  uint64_t begin = offset, end = offset + n;
  // The written ranges stay disjoint and merged: a piece may not overlap one
  // already written.
  auto next = t.written.upper_bound(begin);
  auto prev = next == t.written.begin() ? t.written.end() : std::prev(next);
  if ((prev != t.written.end() && prev->second > begin) || (next != t.written.end() && next->first < end))
    throw Error(ctx + "bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") overlap bytes already written");
  const Part& part = parts_[t.part];
  pwrite_all(part.fd, static_cast<const uint8_t*>(data), n, part.data_start + t.offset + offset, part.tmp);
  if (prev != t.written.end() && prev->second == begin) {
    begin = prev->first;
    t.written.erase(prev);
  }
  if (next != t.written.end() && next->first == end) {
    end = next->second;
    t.written.erase(next);
  }
  t.written.emplace(begin, end);
}

void GgufStreamWriter::finish() {
  if (!started() || finished_) throw Error(prefix() + "finish() without begin()");
  for (const Tensor& t : tensors_) {
    if (t.sparse) continue;
    uint64_t done = 0;
    for (const auto& [b, e] : t.written) done += e - b;
    if (done != t.nbytes)
      throw Error(prefix() + "tensor " + gguf_quoted(t.name) + ": " + std::to_string(done) + " of " +
                  std::to_string(t.nbytes) + " bytes written (" + parts_[t.part].path + ")");
  }
  for (Part& part : parts_) {
    if (::fsync(part.fd) != 0) throw Error("cannot sync " + part.tmp + ": " + std::strerror(errno));
    const int rc = ::close(part.fd);
    part.fd = -1;
    if (rc != 0) throw Error("cannot write " + part.tmp + ": " + std::strerror(errno));
  }
  finished_ = true;
  // Every part is complete before any is renamed into place.
  for (Part& part : parts_) {
    if (::rename(part.tmp.c_str(), part.path.c_str()) != 0)
      throw Error("cannot rename " + part.tmp + " to " + part.path + ": " + std::strerror(errno));
    part.renamed = true;
  }
}

}  // namespace dgemma
