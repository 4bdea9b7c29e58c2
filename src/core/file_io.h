#pragma once
// Whole-file reads and writes that every layer shares: reading a text file,
// writing all of a buffer to a descriptor, and writing a file under a
// temporary name that is renamed into place only once complete (so a reader
// never sees a partial file and an interrupted write leaves nothing behind).
// Errors are dgemma::Error naming the path and the system's reason.
#include <cstdint>
#include <string>
#include <string_view>

namespace dgemma {

// The whole file at `path` (a regular file).
std::string read_text_file(const std::string& path);

// Writes n bytes at p to fd, retrying short writes and EINTR; `path` names
// the file in errors.
void write_all(int fd, const uint8_t* p, uint64_t n, const std::string& path);

// A file written at a temporary path and renamed to its final path by
// commit(); removed on destruction unless committed.
class TempFile {
 public:
  explicit TempFile(std::string path);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the file (reporting a failed close) and renames it to final_path.
  void commit(const std::string& final_path);

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `text` to `path` through a TempFile at path + ".tmp".
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace dgemma
