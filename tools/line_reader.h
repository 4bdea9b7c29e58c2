#pragma once
// Reads `chat`'s input lines. From a pipe or file it reads stdin with stdio,
// byte for byte as before (a final line without '\n' still counts). On a
// terminal it edits the line in place (line_editor.h: cursor keys, history,
// Ctrl-A/E/K/U/W) unless the terminal cannot (TERM=dumb). Either way a
// Ctrl-C (SIGINT, see interrupt.h; or the ^C key in the editor) while waiting
// ends the read with kInterrupted instead of killing the process.
#include <memory>
#include <string>

namespace dgemma::cli {

class LineEditor;

class LineReader {
 public:
  enum class Status { kLine, kEof, kInterrupted };
  // `edit`: use the line editor (stdin and stdout are a capable terminal).
  explicit LineReader(bool edit);
  ~LineReader();
  // Shows `prompt` (on a terminal) and reads one line without its '\n'.
  Status read(const std::string& prompt, std::string& line);

 private:
  Status read_plain(std::string& line);
  std::unique_ptr<LineEditor> editor_;
  std::string partial_;  // bytes of an unfinished line kept across an interrupt
};

}  // namespace dgemma::cli
