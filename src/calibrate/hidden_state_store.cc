#include "calibrate/hidden_state_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "dgemma/error.h"

namespace dgemma {
namespace {

void transfer(bool write, int fd, const std::string& path, char* data, uint64_t n, uint64_t at) {
  while (n > 0) {
    const ssize_t r = write ? ::pwrite(fd, data, n, off_t(at)) : ::pread(fd, data, n, off_t(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw Error(path + ": cannot " + (write ? "write" : "read") +
                  " calibration states: " + (r < 0 ? std::strerror(errno) : "unexpected end of file"));
    data += r;
    n -= uint64_t(r);
    at += uint64_t(r);
  }
}

}  // namespace

HiddenStateStore::HiddenStateStore(std::vector<int64_t> rows, int64_t width, const std::string& scratch_dir)
    : rows_(std::move(rows)), width_(width) {
  for (int64_t r : rows_) {
    offset_.push_back(total_);
    total_ += uint64_t(r) * uint64_t(width_);
  }
  if (scratch_dir.empty()) {
    memory_.resize(rows_.size());
    return;
  }
  std::string tmpl = scratch_dir + "/.dgemma-calibration-XXXXXX";
  fd_ = ::mkstemp(tmpl.data());
  if (fd_ < 0) throw Error(scratch_dir + ": cannot create a scratch file for calibration: " + std::strerror(errno));
  path_ = tmpl;
  ::unlink(path_.c_str());  // gone when closed, whatever happens
}

HiddenStateStore::~HiddenStateStore() {
  if (fd_ >= 0) ::close(fd_);
}

void HiddenStateStore::check(size_t i) const {
  if (i >= rows_.size()) throw Error("calibration states: no sequence " + std::to_string(i));
}

void HiddenStateStore::put(size_t i, const Tensor& x) {
  check(i);
  x.ensure_host();
  if (x.dtype != DType::kF32 || x.numel() != rows_[i] * width_)
    throw Error("calibration states: sequence " + std::to_string(i) + " has shape " + x.shape_string() +
                ", expected [" + std::to_string(rows_[i]) + ", " + std::to_string(width_) + "]");
  if (fd_ < 0) {
    memory_[i] = x;
    return;
  }
  transfer(true, fd_, path_, reinterpret_cast<char*>(const_cast<float*>(x.f.data())), uint64_t(x.numel()) * 4,
           offset_[i] * 4);
}

Tensor HiddenStateStore::get(size_t i) const {
  check(i);
  if (fd_ < 0) {
    if (memory_[i].shape.empty())
      throw Error("calibration states: sequence " + std::to_string(i) + " was never stored");
    return memory_[i];
  }
  Tensor t = Tensor::f32({rows_[i], width_});
  transfer(false, fd_, path_, reinterpret_cast<char*>(t.f.data()), uint64_t(t.numel()) * 4, offset_[i] * 4);
  return t;
}

}  // namespace dgemma
