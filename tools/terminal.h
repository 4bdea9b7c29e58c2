#pragma once
// Terminal helpers for `run --visualize` and `chat`: TTY detection, width,
// and a cursor model that lets a region printed after some text be erased
// and redrawn in place with plain ANSI sequences (no curses).
#include <cstdio>
#include <string>
#include <string_view>

namespace dgemma::cli {

bool is_tty(FILE* f);
// Columns of the terminal behind `f` (80 when unknown).
int terminal_columns(FILE* f);

// Display width of one code point: 0 for combining marks, 2 for wide
// (East Asian / emoji) characters, else 1.
int codepoint_width(char32_t c);

// Replaces C0 controls except '\n' and DEL by U+FFFD and tabs by a space, so
// that model output cannot move the cursor behind the cursor model's back.
std::string sanitize_for_terminal(std::string_view text);

// Follows the cursor column over printed text, given the terminal width.
// ANSI CSI sequences ("\x1b[...m") have no width; '\n' starts a new row;
// a character that does not fit wraps.
class CursorModel {
 public:
  explicit CursorModel(int columns) : columns_(columns < 1 ? 80 : columns) {}
  // Advances over `text`; returns how many rows the cursor moved down.
  int advance(std::string_view text);
  int column() const { return column_; }
  void set_column(int column) { column_ = column; }

 private:
  int columns_;
  int column_ = 0;
};

// A region at the end of the output that is redrawn in place: the text
// before it stays; draw() erases the previous drawing and prints the new one.
class LiveRegion {
 public:
  LiveRegion(FILE* out, int columns) : out_(out), cursor_(columns) {}
  // Prints permanent text (erasing the live region first).
  void print(std::string_view text);
  // Replaces the live region with `text`.
  void draw(std::string_view text);
  // Erases the live region.
  void clear();

 private:
  FILE* out_;
  CursorModel cursor_;
  int region_rows_ = 0;     // rows the live region spans below its start
  int region_start_col_ = 0;
  bool drawn_ = false;
};

namespace ansi {
inline constexpr const char* kReset = "\x1b[0m";
inline constexpr const char* kBold = "\x1b[1m";
inline constexpr const char* kDim = "\x1b[2m";
inline constexpr const char* kAccepted = "\x1b[1;32m";  // bold green
inline constexpr const char* kStatus = "\x1b[36m";      // cyan
}  // namespace ansi

}  // namespace dgemma::cli
