#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dgemma/error.h"

namespace dgemma {

std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  std::string out;
  out.reserve(size_t(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      throw Error("cannot read " + path + ": " + std::strerror(e));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path) {
  while (n > 0) {
    size_t chunk = size_t(std::min<uint64_t>(n, uint64_t(1) << 30));
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
    p += w;
    n -= uint64_t(w);
  }
}

TempFile::TempFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create " + path_ + ": " + std::strerror(errno));
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

void TempFile::commit(const std::string& final_path) {
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw Error("cannot write " + path_ + ": " + std::strerror(errno));
  if (::rename(path_.c_str(), final_path.c_str()) != 0)
    throw Error("cannot rename " + path_ + " to " + final_path + ": " + std::strerror(errno));
  committed_ = true;
}

void write_file_atomically(const std::string& path, std::string_view text) {
  TempFile tmp(path + ".tmp");
  write_all(tmp.fd(), reinterpret_cast<const uint8_t*>(text.data()), text.size(), tmp.path());
  tmp.commit(path);
}

}  // namespace dgemma
