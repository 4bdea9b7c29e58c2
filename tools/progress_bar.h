#pragma once
// A one-line progress bar on stderr for long model loads and `dgemma
// quantize`: redrawn in place with '\r', at most every `interval_s`, and only
// when the stream is a terminal, so pipes, logs and tests see nothing.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace dgemma::cli {

// What done/total count: bytes (printed in MiB/GiB) or weights (elements,
// printed with k/M/G suffixes).
enum class ProgressUnit { kBytes, kWeights };

// The bar's text for `done` of `total` after `seconds`, at most `columns - 1`
// display columns (the last column is left free so that no terminal wraps):
//   "loading [#########...........]  45.0%  1.16G/2.58G weights  3s  NAME"
// `item` (e.g. the current tensor) is shortened from the left ("...suffix")
// or dropped to fit; so is the bar itself on a very narrow terminal.
std::string progress_line(std::string_view label, uint64_t done, uint64_t total, double seconds, ProgressUnit unit,
                          std::string_view item, int columns);

struct ProgressBarOptions {
  std::string label = "loading";
  ProgressUnit unit = ProgressUnit::kWeights;
  // Nothing is drawn before this many seconds have passed, so a fast load
  // prints nothing at all.
  double delay_s = 0.5;
  // Least time between two redraws.
  double interval_s = 0.1;
  // On finish(): true leaves the final bar (at its last state) on its line;
  // false erases it.
  bool keep = false;
  // Draw at all (e.g. false for --no-progress). Even when true, nothing is
  // drawn unless the stream is a terminal or `force_tty` is set (tests).
  bool enabled = true;
  bool force_tty = false;
  // Seconds on a monotonic clock; steady_clock when empty (tests inject one).
  std::function<double()> clock;
  // Terminal width; read from the stream when 0.
  int columns = 0;
};

class ProgressBar {
 public:
  ProgressBar(FILE* out, ProgressBarOptions options);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Whether this bar can draw at all (a terminal, and enabled).
  bool active() const { return active_; }
  // Records the progress; redraws when due.
  void update(uint64_t done, uint64_t total, std::string_view item = {});
  // Ends the bar (idempotent): erases its line or, with `keep`, redraws the
  // last state and ends the line, so that later output starts on a clean
  // line. Does nothing when nothing was drawn.
  void finish();

 private:
  void draw(double now);

  FILE* out_;
  ProgressBarOptions o_;
  bool active_;
  double start_ = 0;
  double last_draw_ = 0;
  bool drawn_ = false;
  bool dirty_ = false;      // progress recorded since the last draw
  size_t drawn_width_ = 0;  // columns of the text on the line now
  uint64_t done_ = 0, total_ = 0;
  std::string item_;
};

}  // namespace dgemma::cli
