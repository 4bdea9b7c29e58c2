#include "quantize/stream_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"

namespace dgemma {

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void SafetensorsStreamWriter::declare(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  if (fd_ >= 0) throw Error("SafetensorsStreamWriter: " + name + " declared after begin()");
  if (name == "__metadata__" || !json::is_valid_utf8(name))
    throw Error("SafetensorsStreamWriter: invalid tensor name " + json::quoted(name));
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("SafetensorsStreamWriter: tensor " + name + " has a negative dimension");
    numel *= uint64_t(d);
  }
  const uint64_t bits = numel * uint64_t(dtype_bits(dtype));
  if (bits % 8) throw Error("SafetensorsStreamWriter: tensor " + name + " is not a whole number of bytes");
  if (!tensors_.emplace(name, Entry{dtype, std::move(shape), bits / 8, 0, 0}).second)
    throw Error("SafetensorsStreamWriter: tensor " + json::quoted(name) + " declared twice");
}

void SafetensorsStreamWriter::set_metadata(std::string key, std::string value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}

const SafetensorsStreamWriter::Entry& SafetensorsStreamWriter::entry(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("SafetensorsStreamWriter: tensor " + json::quoted(name) + " was not declared");
  return it->second;
}

uint64_t SafetensorsStreamWriter::nbytes(const std::string& name) const { return entry(name).nbytes; }

void SafetensorsStreamWriter::begin(const std::string& path) {
  std::vector<std::pair<const std::string*, Entry*>> order;
  for (auto& [name, e] : tensors_) order.emplace_back(&name, &e);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_bits(a.second->dtype) > dtype_bits(b.second->dtype);
  });
  std::vector<SafetensorsEntry> entries;
  uint64_t offset = 0;
  for (auto& [name, e] : order) {
    e->offset = offset;
    offset += e->nbytes;
    entries.push_back({*name, e->dtype, &e->shape, e->nbytes});
  }
  const std::string head = safetensors_head(entries, metadata_, path);
  data_bytes_ = offset;
  path_ = path;
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create " + tmp_ + ": " + std::strerror(errno));
  data_start_ = head.size();
  if (::ftruncate(fd_, off_t(data_start_ + data_bytes_)) != 0)
    throw Error("cannot size " + tmp_ + ": " + std::strerror(errno));
  uint64_t done = 0;
  while (done < head.size()) {
    const ssize_t w = ::pwrite(fd_, head.data() + done, head.size() - done, off_t(done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("cannot write " + tmp_ + ": " + std::strerror(errno));
    done += uint64_t(w);
  }
}

void SafetensorsStreamWriter::write(const std::string& name, const void* data, uint64_t n, uint64_t offset) {
  if (fd_ < 0) throw Error("SafetensorsStreamWriter: write before begin()");
  Entry& e = const_cast<Entry&>(entry(name));
  if (offset + n > e.nbytes)
    throw Error("SafetensorsStreamWriter: " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                " overflow tensor " + name + " of " + std::to_string(e.nbytes) + " bytes");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t done = 0;
  while (done < n) {
    const size_t chunk = size_t(std::min<uint64_t>(n - done, uint64_t(1) << 30));
    const ssize_t w = ::pwrite(fd_, p + done, chunk, off_t(data_start_ + e.offset + offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("cannot write " + tmp_ + ": " + std::strerror(errno));
    done += uint64_t(w);
  }
  e.written += n;
}

void SafetensorsStreamWriter::finish() {
  for (const auto& [name, e] : tensors_)
    if (e.written != e.nbytes)
      throw Error("SafetensorsStreamWriter: tensor " + name + " got " + std::to_string(e.written) + " of " +
                  std::to_string(e.nbytes) + " bytes (" + path_ + ")");
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    ::unlink(tmp_.c_str());
    throw Error("cannot write " + tmp_ + ": " + std::strerror(errno));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    ::unlink(tmp_.c_str());
    throw Error("cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno));
  }
}

}  // namespace dgemma
