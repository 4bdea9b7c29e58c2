#pragma once
// A small line editor for `chat` on a terminal (no readline/libedit
// dependency): the terminal is put in raw mode for the duration of one read.
// Keys: printable text (UTF-8) inserts; Left/Right or Ctrl-B/F move by a
// character; Home/End or Ctrl-A/E; Backspace/Ctrl-H and Delete; Ctrl-K/U
// delete to the end/start; Ctrl-W deletes the previous word; Up/Down or
// Ctrl-P/N walk the history of this session's lines; Ctrl-L clears the
// screen; Enter accepts; Ctrl-D on an empty line is end of input; Ctrl-C
// abandons the line (kInterrupted). A line longer than the terminal scrolls
// horizontally.
#include <string>
#include <vector>

namespace dgemma::cli {

class LineEditor {
 public:
  enum class Result { kLine, kEof, kInterrupted };
  // Reads one line from stdin (a terminal), echoing on stdout.
  Result read(const std::string& prompt, std::string& line);
  const std::vector<std::string>& history() const { return history_; }

 private:
  std::vector<std::string> history_;
};

// The editing state, separate from the terminal so that it can be tested.
class EditBuffer {
 public:
  const std::string& text() const { return text_; }
  size_t cursor() const { return cursor_; }  // byte offset, on a code point boundary
  void set(std::string text);                // cursor to the end
  void insert(const std::string& s);
  void backspace();
  void erase();  // the character under the cursor
  void left();
  void right();
  void home() { cursor_ = 0; }
  void end() { cursor_ = text_.size(); }
  void kill_to_end() { text_.erase(cursor_); }
  void kill_to_start();
  void kill_word();  // the word before the cursor, with the spaces after it

 private:
  std::string text_;
  size_t cursor_ = 0;
};

// What to print for `prompt` + `text` with the cursor at byte `cursor` in
// `columns` terminal columns: the visible slice of the text (scrolled so that
// the cursor shows) and the cursor's column.
struct EditView {
  std::string visible;
  int cursor_column = 0;
};
EditView edit_view(const std::string& prompt, const std::string& text, size_t cursor, int columns);

}  // namespace dgemma::cli
