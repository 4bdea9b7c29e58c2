#include "line_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "interrupt.h"
#include "line_editor.h"

namespace dgemma::cli {

LineReader::LineReader(bool edit) {
  if (edit) editor_ = std::make_unique<LineEditor>();
}

LineReader::~LineReader() = default;

LineReader::Status LineReader::read(const std::string& prompt, std::string& line) {
  if (editor_) {
    switch (editor_->read(prompt, line)) {
      case LineEditor::Result::kLine: return Status::kLine;
      case LineEditor::Result::kEof: return Status::kEof;
      case LineEditor::Result::kInterrupted: return Status::kInterrupted;
    }
  }
  if (!prompt.empty()) {
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  return read_plain(line);
}

LineReader::Status LineReader::read_plain(std::string& line) {
  while (true) {
    if (interrupt_pending()) return Status::kInterrupted;
    errno = 0;
    const int c = std::getc(stdin);
    if (c == EOF) {
      if (std::ferror(stdin) && errno == EINTR) {
        std::clearerr(stdin);
        if (interrupt_pending()) return Status::kInterrupted;
        continue;
      }
      if (partial_.empty()) return Status::kEof;
      line.swap(partial_);
      partial_.clear();
      return Status::kLine;
    }
    if (c == '\n') {
      line.swap(partial_);
      partial_.clear();
      return Status::kLine;
    }
    partial_ += char(c);
  }
}

}  // namespace dgemma::cli
