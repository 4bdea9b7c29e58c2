#include "output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "dgemma/error.h"

namespace dgemma::cli {
namespace {

bool g_stdout_closed = false;

std::string describe(FILE* f, int err) {
  const std::string name = f == stdout ? "stdout" : f == stderr ? "stderr" : "the output";
  if (f == stdout && g_stdout_closed) return name + " is closed (nothing could be written)";
  if (err == 0) return "writing to " + name + " failed";
  return "writing to " + name + " failed: " + std::strerror(err);
}

}  // namespace

void guard_stdout() {
  if (fcntl(STDOUT_FILENO, F_GETFD) != -1 || errno != EBADF) return;
  g_stdout_closed = true;
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (fd != STDOUT_FILENO) {
    dup2(fd, STDOUT_FILENO);  // dup2 clears FD_CLOEXEC on the copy
    close(fd);
  } else {
    fcntl(fd, F_SETFD, 0);
  }
}

std::string stdout_failure() {
  errno = 0;
  std::cout.flush();
  const bool cout_bad = std::cout.bad();
  const int flushed = std::fflush(stdout);
  const int err = errno;
  if (flushed == 0 && !std::ferror(stdout) && !cout_bad) return {};
  return describe(stdout, err);
}

void check_output(FILE* f) {
  errno = 0;
  const int flushed = std::fflush(f);
  const int err = errno;
  if (flushed != 0 || std::ferror(f)) throw Error(describe(f, err));
}

}  // namespace dgemma::cli
