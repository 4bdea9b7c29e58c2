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

// What the terminal behind `f` may be sent: cursor movement needs a TTY
// whose TERM is not "dumb"; colour additionally needs NO_COLOR unset or
// empty (https://no-color.org).
struct TerminalCaps {
  bool tty = false;
  bool cursor = false;
  bool color = false;
};
TerminalCaps terminal_caps(FILE* f);

// Starts following SIGWINCH (idempotent); window_resized() then says, once
// per resize, that terminal_columns() should be read again.
void watch_window_size();
bool window_resized();

// Display width of one code point, from the generated Unicode tables
// (unicode_width_table.cc): 0 for combining marks, Indic/Thai vowel signs,
// variation selectors, ZWJ and other format characters; 2 for East Asian
// Wide/Fullwidth characters and emoji with emoji presentation; else 1.
int codepoint_width(char32_t c);
// Display width of UTF-8 text, skipping ANSI CSI sequences (no wrapping).
int display_width(std::string_view text);

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
  int columns() const { return columns_; }
  void set_column(int column) { column_ = column; }
  void set_columns(int columns) { columns_ = columns < 1 ? 80 : columns; }

 private:
  int columns_;
  int column_ = 0;
};

// A region at the end of the output that is redrawn in place: the text
// before it stays; draw() erases the previous drawing and prints the new one.
// The region starts on the row below the permanent text and is drawn with
// the terminal's auto-wrap off, so it spans exactly one row per '\n' in it
// whatever the terminal thinks of the width of its characters (the caller
// breaks its lines to fit columns(): see canvas_frame.h); a wrong width guess
// can clip a row, never make the erase climb into the permanent text. The
// width is re-read after SIGWINCH.
class LiveRegion {
 public:
  LiveRegion(FILE* out, int columns) : out_(out), cursor_(columns) {}
  // Prints permanent text (erasing the live region first).
  void print(std::string_view text);
  // Replaces the live region with `text` (lines separated by '\n').
  void draw(std::string_view text);
  // Erases the live region.
  void clear();
  // Terminal columns as last read.
  int columns();

 private:
  FILE* out_;
  CursorModel cursor_;
  int region_rows_ = 0;  // rows below the permanent text's last row
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
