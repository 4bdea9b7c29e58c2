// safetensors writer following the reference writer's layout
// (docs/formats.md §1.3).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

// Position of each dtype in the reference `Dtype` enum (safetensors
// `tensor.rs`), which is declared in increasing alignment order. The writer
// sorts by it descending so that, with the data buffer starting at a multiple
// of 8, every tensor starts naturally aligned.
int reference_rank(DType t) {
  switch (t) {
    case DType::kBool: return 0;
    case DType::kF4: return 1;
    case DType::kF6_E2M3: return 2;
    case DType::kF6_E3M2: return 3;
    case DType::kU8: return 4;
    case DType::kI8: return 5;
    case DType::kF8_E5M2: return 6;
    case DType::kF8_E4M3: return 7;
    case DType::kF8_E8M0: return 8;
    case DType::kF8_E4M3FNUZ: return 9;
    case DType::kF8_E5M2FNUZ: return 10;
    case DType::kI16: return 11;
    case DType::kU16: return 12;
    case DType::kF16: return 13;
    case DType::kBF16: return 14;
    case DType::kI32: return 15;
    case DType::kU32: return 16;
    case DType::kF32: return 17;
    case DType::kC64: return 18;
    case DType::kF64: return 19;
    case DType::kI64: return 20;
    case DType::kU64: return 21;
  }
  return 0;
}

// Byte size of a tensor, with the reader's limits (§1.5) so that whatever we
// write can be read back.
uint64_t checked_nbytes(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxSafetensorsDim)
      throw Error("SafetensorsWriter: tensor " + json::quoted(name) + ": invalid dimension " + std::to_string(d));
    if (__builtin_mul_overflow(numel, uint64_t(d), &numel) || numel > uint64_t(INT64_MAX))
      throw Error("SafetensorsWriter: tensor " + json::quoted(name) + ": element count overflows 64 bits");
  }
  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_bits(dtype)), &bits))
    throw Error("SafetensorsWriter: tensor " + json::quoted(name) + ": byte size overflows 64 bits");
  if (bits % 8 != 0) {
    throw Error("SafetensorsWriter: tensor " + json::quoted(name) + ": " + std::to_string(bits) + " bits of " +
                std::string(dtype_name(dtype)) + " is not a whole number of bytes");
  }
  return bits / 8;
}

// Names and metadata must be valid UTF-8: append_quoted would otherwise
// silently replace bad bytes and the tensor could not be found by its name.
void check_utf8(std::string_view what, const std::string& s) {
  if (!json::is_valid_utf8(s))
    throw Error("SafetensorsWriter: " + std::string(what) + " " + json::quoted(s) + " is not valid UTF-8");
}

}  // namespace

std::string safetensors_head(const std::vector<SafetensorsEntry>& entries,
                             std::vector<std::pair<std::string, std::string>> metadata, const std::string& path) {
  std::string header = "{";
  if (!metadata.empty()) {
    std::sort(metadata.begin(), metadata.end());
    header += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      if (i) header += ',';
      json::append_quoted(header, metadata[i].first);
      header += ':';
      json::append_quoted(header, metadata[i].second);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    if (header.size() > 1) header += ',';
    json::append_quoted(header, e.name);
    header += ":{\"dtype\":\"";
    header += dtype_name(e.dtype);
    header += "\",\"shape\":[";
    for (size_t i = 0; i < e.shape->size(); ++i) {
      if (i) header += ',';
      header += std::to_string((*e.shape)[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + e.nbytes) + "]}";
    offset += e.nbytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxSafetensorsHeader)
    throw Error("safetensors header of " + path + " would exceed " + std::to_string(kMaxSafetensorsHeader) + " bytes");
  std::string head(8, '\0');
  for (int i = 0; i < 8; ++i) head[size_t(i)] = char(uint8_t(uint64_t(header.size()) >> (8 * i)));
  return head + header;
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data) {
  check_utf8("tensor name", name);
  Pending p{std::move(name), dtype, std::move(shape), {}, false, 0};
  p.nbytes = checked_nbytes(p.name, dtype, p.shape);
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (p.nbytes > 0 && !bytes) throw Error("SafetensorsWriter: tensor " + json::quoted(p.name) + ": no data");
  if (p.nbytes > 0) p.bytes.assign(bytes, bytes + p.nbytes);
  pending_.push_back(std::move(p));
}

void SafetensorsWriter::add_sparse(std::string name, DType dtype, std::vector<int64_t> shape) {
  check_utf8("tensor name", name);
  Pending p{std::move(name), dtype, std::move(shape), {}, true, 0};
  p.nbytes = checked_nbytes(p.name, dtype, p.shape);
  pending_.push_back(std::move(p));
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  check_utf8("metadata key", key);
  check_utf8("metadata value", value);
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void SafetensorsWriter::write(const std::string& path) const {
  std::vector<const Pending*> order;
  for (const Pending& p : pending_) order.push_back(&p);
  std::sort(order.begin(), order.end(), [](const Pending* a, const Pending* b) {
    int ra = reference_rank(a->dtype), rb = reference_rank(b->dtype);
    if (ra != rb) return ra > rb;
    return a->name < b->name;
  });
  {
    std::vector<std::string_view> names;
    for (const Pending* p : order) names.push_back(p->name);
    std::sort(names.begin(), names.end());
    auto dup = std::adjacent_find(names.begin(), names.end());
    if (dup != names.end())
      throw Error("SafetensorsWriter: tensor " + json::quoted(*dup) + " added twice (" + path + ")");
    if (std::binary_search(names.begin(), names.end(), std::string_view("__metadata__")))
      throw Error("SafetensorsWriter: \"__metadata__\" is reserved and cannot name a tensor (" + path + ")");
  }

  std::vector<SafetensorsEntry> entries;
  uint64_t data_bytes = 0;
  for (const Pending* p : order) {
    entries.push_back({p->name, p->dtype, &p->shape, p->nbytes});
    data_bytes += p->nbytes;
  }
  const std::string head = safetensors_head(entries, metadata_, path);
  TempFile tmp(path + ".tmp." + std::to_string(::getpid()));
  write_all(tmp.fd(), reinterpret_cast<const uint8_t*>(head.data()), head.size(), path);
  const off_t data_start = off_t(head.size());
  for (const Pending* p : order) {
    if (p->sparse) {
      // Skip over the tensor: the gap becomes a hole that reads as zeros and
      // takes no disk blocks.
      if (::lseek(tmp.fd(), off_t(p->nbytes), SEEK_CUR) < 0)
        throw Error("cannot seek in " + path + ": " + std::strerror(errno));
    } else {
      write_all(tmp.fd(), p->bytes.data(), p->nbytes, path);
    }
  }
  // A trailing sparse tensor leaves the file short; extend it to full size.
  if (::ftruncate(tmp.fd(), data_start + off_t(data_bytes)) != 0)
    throw Error("cannot resize " + path + ": " + std::strerror(errno));
  tmp.commit(path);
}

}  // namespace dgemma
