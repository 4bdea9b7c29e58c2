#pragma once
// Failed writes to stdout are errors: `dgemma run > /dev/full` or with stdout
// closed must say so on stderr and exit non-zero instead of losing the
// output silently. main() calls guard_stdout() first and stdout_failure()
// after the subcommand; streaming writers call check_output() after each
// flush so that a long generation stops at the first failed write.
#include <cstdio>
#include <string>

namespace dgemma::cli {

// When file descriptor 1 is closed, occupies it with a read-only /dev/null so
// that no file opened later lands on it, and every write to stdout fails
// (EBADF); the failure is then reported as "stdout is closed".
void guard_stdout();

// Flushes stdout and std::cout; returns "" when every write so far
// succeeded, else what went wrong ("writing to stdout failed: No space left
// on device", "stdout is closed ...").
std::string stdout_failure();

// Flushes `f` and throws dgemma::Error when a write to it has failed.
void check_output(FILE* f);

}  // namespace dgemma::cli
