// safetensors header validation and memory-mapped file access
// (docs/formats.md §1.1, §1.4, §1.5).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string hex_byte(unsigned char c) {
  static const char* kHex = "0123456789abcdef";
  return std::string("0x") + kHex[c >> 4] + kHex[c & 15];
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A JSON value for an error message, cut short so that a hostile header
// cannot produce a megabyte-long message.
std::string brief(const json::Value& v) {
  std::string s = json::dump(v);
  if (s.size() > 64) {
    size_t cut = 60;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
    s = s.substr(0, cut) + " ...";
  }
  return s;
}

// Builds messages of the form `<file>: tensor "<name>": <why>`.
class Checker {
 public:
  explicit Checker(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& why) const { throw Error(source_ + ": " + why); }
  [[noreturn]] void fail_tensor(std::string_view name, const std::string& why) const {
    throw Error(source_ + ": tensor " + json::quoted(name) + ": " + why);
  }

  // The header text must be one JSON object, optionally surrounded by JSON
  // whitespace (§1.4: leading whitespace is accepted by the reference for
  // page-aligning writers; trailing spaces are the writer's padding).
  json::Value parse_header_json(std::string_view text) const {
    if (!json::is_valid_utf8(text)) fail("header is not valid UTF-8");
    size_t first = 0;
    while (first < text.size() && is_json_space(text[first])) ++first;
    if (first == text.size()) fail("header is empty (only whitespace)");
    const char c = text[first];
    const bool value_start =
        c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n';
    if (!value_start) {
      fail("header has a non-whitespace byte " + hex_byte(static_cast<unsigned char>(c)) + " at header offset " +
           std::to_string(first) + " before the JSON object (only space/tab/CR/LF padding is allowed)");
    }
    json::ParseOptions opt;
    opt.source = source_ + ": header";
    opt.max_depth = 64;  // a valid header nests 3 levels deep
    json::Value root;
    try {
      root = json::parse(text, opt);
    } catch (const Error&) {
      report_trailing_padding(text, opt);
      throw;
    }
    if (!root.is_object())
      fail(std::string("header top level is ") + json::kind_name(root.kind()) + ", expected an object");
    return root;
  }

 private:
  // Distinguishes "valid object followed by junk" (e.g. NUL padding) from
  // plain invalid JSON so that the message says what is actually wrong.
  void report_trailing_padding(std::string_view text, const json::ParseOptions& opt) const {
    size_t close = text.rfind('}');
    if (close == std::string_view::npos) return;
    size_t junk = close + 1;
    while (junk < text.size() && is_json_space(text[junk])) ++junk;
    if (junk == text.size()) return;
    try {
      json::parse(text.substr(0, close + 1), opt);
    } catch (const Error&) {
      return;  // not a padding problem; let the parser's message stand
    }
    fail("header has a non-whitespace byte " + hex_byte(static_cast<unsigned char>(text[junk])) + " at header offset " +
         std::to_string(junk) + " after the JSON object (only space/tab/CR/LF padding is allowed)");
  }

  const std::string& source_;
};

// Reads a JSON integer that must be >= 0; `what` names the field in errors.
uint64_t read_non_negative(const Checker& ck, std::string_view name, const json::Value& v, const std::string& what) {
  if (!v.is_integer()) {
    if (v.is_number() && std::isfinite(v.as_double()) && v.as_double() == std::floor(v.as_double()) &&
        std::fabs(v.as_double()) >= 9.2e18)
      ck.fail_tensor(name, what + " = " + brief(v) + " is out of the 64-bit integer range");
    ck.fail_tensor(name, what + " is not an integer (got " + brief(v) + ")");
  }
  int64_t x = v.as_int();
  if (x < 0) ck.fail_tensor(name, what + " = " + std::to_string(x) + " is negative");
  return uint64_t(x);
}

TensorInfo parse_tensor_entry(const Checker& ck, const std::string& name, const json::Value& entry) {
  if (!entry.is_object()) {
    ck.fail_tensor(name, std::string("entry is ") + json::kind_name(entry.kind()) +
                             ", expected an object with dtype, shape and data_offsets");
  }
  for (const auto& [key, value] : entry.as_object()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      ck.fail_tensor(name, "unexpected field " + json::quoted(key) + " (allowed: dtype, shape, data_offsets)");
  }
  const json::Value* dtype = entry.find("dtype");
  const json::Value* shape = entry.find("shape");
  const json::Value* offsets = entry.find("data_offsets");
  if (!dtype) ck.fail_tensor(name, "missing field \"dtype\"");
  if (!shape) ck.fail_tensor(name, "missing field \"shape\"");
  if (!offsets) ck.fail_tensor(name, "missing field \"data_offsets\"");

  TensorInfo info;
  info.name = name;
  if (!dtype->is_string())
    ck.fail_tensor(name, std::string("dtype is ") + json::kind_name(dtype->kind()) + ", expected a string");
  auto dt = dtype_from_name(dtype->as_string());
  if (!dt) ck.fail_tensor(name, "unknown dtype " + json::quoted(dtype->as_string()));
  info.dtype = *dt;

  if (!shape->is_array())
    ck.fail_tensor(name, std::string("shape is ") + json::kind_name(shape->kind()) + ", expected an array");
  uint64_t numel = 1;
  bool overflow = false;
  const auto& dims = shape->as_array();
  for (size_t i = 0; i < dims.size(); ++i) {
    const std::string what = "shape[" + std::to_string(i) + "]";
    uint64_t d = read_non_negative(ck, name, dims[i], what);
    if (d > uint64_t(kMaxSafetensorsDim))
      ck.fail_tensor(name, what + " = " + std::to_string(d) + " exceeds the limit 2^48");
    info.shape.push_back(int64_t(d));
    overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
  }
  // An element count that does not fit int64 cannot be indexed either.
  if (overflow || numel > uint64_t(INT64_MAX))
    ck.fail_tensor(name, "shape " + shape_str(info.shape) + " has an element count that overflows 64 bits");

  if (!offsets->is_array() || offsets->as_array().size() != 2) {
    ck.fail_tensor(name, "data_offsets must be exactly two non-negative integers [begin, end], got " + brief(*offsets));
  }
  info.begin = read_non_negative(ck, name, offsets->as_array()[0], "data_offsets[0]");
  info.end = read_non_negative(ck, name, offsets->as_array()[1], "data_offsets[1]");
  if (info.begin > info.end) {
    ck.fail_tensor(name, "data_offsets begin " + std::to_string(info.begin) + " > end " + std::to_string(info.end));
  }

  const std::string dtype_text(dtype_name(info.dtype));
  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_bits(info.dtype)), &bits))
    ck.fail_tensor(name, "shape " + shape_str(info.shape) + " x " + dtype_text + " overflows 64 bits");
  if (bits % 8 != 0) {
    ck.fail_tensor(name, "shape " + shape_str(info.shape) + " x " + dtype_text + " = " + std::to_string(bits) +
                             " bits is not a whole number of bytes");
  }
  if (info.nbytes() != bits / 8) {
    ck.fail_tensor(name, "byte size " + std::to_string(info.nbytes()) + " does not match shape " +
                             shape_str(info.shape) + " x " + dtype_text + " = " + std::to_string(bits / 8));
  }
  return info;
}

std::vector<std::pair<std::string, std::string>> parse_metadata(const Checker& ck, const json::Value& v) {
  if (!v.is_object())
    ck.fail("__metadata__ is " + std::string(json::kind_name(v.kind())) + ", expected an object of strings");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : v.as_object()) {
    if (!value.is_string()) {
      ck.fail("__metadata__ value for key " + json::quoted(key) + " is " + json::kind_name(value.kind()) +
              ", expected a string");
    }
    out.emplace_back(key, value.as_string());
  }
  return out;
}

// §1.4 rule 4 and §1.5: sorted by offset, the tensors must tile [0, end)
// exactly. Returns the end of the last tensor.
uint64_t check_layout(const Checker& ck, std::vector<TensorInfo>& tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.begin < expected) {
      ck.fail_tensor(t.name, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                                 "] overlap tensor " + json::quoted(prev->name) + " [" + std::to_string(prev->begin) +
                                 ", " + std::to_string(prev->end) + "]");
    }
    if (t.begin > expected) {
      if (!prev) {
        ck.fail_tensor(t.name, "data starts at offset " + std::to_string(t.begin) +
                                   ", but the first tensor must start at 0 (gap)");
      }
      ck.fail("gap of " + std::to_string(t.begin - expected) + " bytes between tensor " + json::quoted(prev->name) +
              " (ends at " + std::to_string(expected) + ") and tensor " + json::quoted(t.name) + " (begins at " +
              std::to_string(t.begin) + ")");
    }
    expected = t.end;
    prev = &t;
  }
  return expected;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorView::aligned() const {
  // C64 is a pair of f32, so its natural alignment is that of f32.
  const int bits = dtype() == DType::kC64 ? 32 : dtype_bits(dtype());
  const uintptr_t align = bits >= 8 ? uintptr_t(bits / 8) : 1;
  return reinterpret_cast<uintptr_t>(data) % align == 0;
}

SafetensorsHeader parse_safetensors(const uint8_t* bytes, uint64_t file_size, const std::string& source) {
  Checker ck(source);
  if (file_size < 8) {
    ck.fail("file is " + std::to_string(file_size) +
            " bytes, shorter than the 8-byte header length prefix (not a safetensors file?)");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian, §1.1
  if (n == 0) ck.fail("header length is 0");
  if (n > kMaxSafetensorsHeader) {
    ck.fail("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxSafetensorsHeader) +
            " bytes");
  }
  if (n > file_size - 8) {
    ck.fail("header length " + std::to_string(n) + " runs past the end of the " + std::to_string(file_size) +
            "-byte file (truncated header)");
  }
  std::string_view text(reinterpret_cast<const char*>(bytes + 8), size_t(n));
  json::Value root = ck.parse_header_json(text);

  SafetensorsHeader header;
  header.data_offset = 8 + n;
  for (const auto& [name, value] : root.as_object()) {
    if (name == kMetadataKey) {
      header.metadata = parse_metadata(ck, value);
    } else {
      header.tensors.push_back(parse_tensor_entry(ck, name, value));
    }
  }
  const uint64_t data_end = check_layout(ck, header.tensors);
  const uint64_t data_size = file_size - header.data_offset;
  if (data_end > data_size) {
    ck.fail("tensors need " + std::to_string(data_end) + " bytes of data but the file has only " +
            std::to_string(data_size) + " after the header (truncated file)");
  }
  if (data_end < data_size) {
    ck.fail("file has " + std::to_string(data_size - data_end) + " trailing bytes after the last tensor (data " +
            "buffer is " + std::to_string(data_size) + " bytes, tensors end at " + std::to_string(data_end) + ")");
  }
  return header;
}

// ---- SafetensorsFile -------------------------------------------------------

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error("cannot stat " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  f->size_ = uint64_t(st.st_size);
  if (f->size_ > 0) {
    // MAP_PRIVATE + PROT_READ: pages come straight from the page cache and
    // nothing is read until a tensor is touched.
    void* p = ::mmap(nullptr, size_t(f->size_), PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error("cannot mmap " + path + ": " + std::strerror(e));
    f->map_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
  // On a validation error the shared_ptr's destructor unmaps.
  static const uint8_t kEmpty[8] = {};
  f->header_ = parse_safetensors(f->map_ ? f->map_ : kEmpty, f->size_, path);
  for (size_t i = 0; i < f->header_.tensors.size(); ++i) f->by_name_.emplace(f->header_.tensors[i].name, i);
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), size_t(size_));
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& info) const {
  TensorView v;
  v.info = &info;
  v.data = map_ ? map_ + header_.data_offset + info.begin : nullptr;
  v.file = path_;
  return v;
}

}  // namespace dgemma
