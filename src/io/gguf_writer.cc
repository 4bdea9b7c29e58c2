// The streaming GGUF writer (docs/formats.md §5.1 for the layout rules it
// follows, §5.5 for how `dgemma quantize` uses it).
#include "io/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

// ---- keys --------------------------------------------------------------------

void GgufStreamWriter::add_key(const std::string& key, std::string bytes) {
  if (fd_ >= 0 || finished_) throw Error(prefix() + "key " + gguf_quoted(key) + " added after begin()");
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
  if (fd_ >= 0 || finished_) throw Error(ctx + "declared after begin()");
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

// ---- the file ----------------------------------------------------------------

void GgufStreamWriter::begin(const std::string& path) {
  if (fd_ >= 0 || finished_) throw Error(prefix() + "begin() called twice");
  // Packed layout: each tensor at the padded running sum, in declaration
  // order (docs/formats.md §5.1).
  uint64_t offset = 0;
  for (Tensor& t : tensors_) {
    t.offset = offset;
    if (__builtin_add_overflow(offset, padded(t.nbytes), &offset))
      throw Error(prefix() + "the tensors' total size overflows 64 bits (" + path + ")");
  }
  data_bytes_ = offset;

  std::string head = "GGUF";
  put_le(head, kVersion, 4);
  put_le(head, tensors_.size(), 8);
  put_le(head, keys_.size(), 8);
  for (const Key& k : keys_) {
    put_string(head, k.name);
    head += k.bytes;
  }
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put_le(head, t.ne.size(), 4);
    for (int64_t d : t.ne) put_le(head, uint64_t(d), 8);
    put_le(head, uint32_t(t.type), 4);
    put_le(head, t.offset, 8);
  }
  head.append(size_t(padded(head.size()) - head.size()), '\0');
  data_start_ = head.size();

  path_ = path;
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create " + tmp_ + ": " + std::strerror(errno));
  // Sizing first leaves every byte not written a hole reading as zero: the
  // padding, and the unwritten parts of sparse tensors.
  if (::ftruncate(fd_, off_t(data_start_ + data_bytes_)) != 0)
    throw Error("cannot size " + tmp_ + ": " + std::strerror(errno));
  pwrite_all(fd_, reinterpret_cast<const uint8_t*>(head.data()), head.size(), 0, tmp_);
}

void GgufStreamWriter::write(const std::string& name, const void* data, uint64_t n, uint64_t offset) {
  if (fd_ < 0) throw Error(prefix() + "write of tensor " + gguf_quoted(name) + " outside begin()..finish()");
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
  pwrite_all(fd_, static_cast<const uint8_t*>(data), n, data_start_ + t.offset + offset, tmp_);
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
  if (fd_ < 0) throw Error(prefix() + "finish() without begin()");
  for (const Tensor& t : tensors_) {
    if (t.sparse) continue;
    uint64_t done = 0;
    for (const auto& [b, e] : t.written) done += e - b;
    if (done != t.nbytes)
      throw Error(prefix() + "tensor " + gguf_quoted(t.name) + ": " + std::to_string(done) + " of " +
                  std::to_string(t.nbytes) + " bytes written (" + path_ + ")");
  }
  if (::fsync(fd_) != 0) throw Error("cannot sync " + tmp_ + ": " + std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  finished_ = true;
  if (rc != 0) {
    ::unlink(tmp_.c_str());
    throw Error("cannot write " + tmp_ + ": " + std::strerror(errno));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp_.c_str());
    throw Error("cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(e));
  }
}

}  // namespace dgemma
