#include "canvas_frame.h"

#include "terminal.h"

namespace dgemma::cli {

bool is_last_step(const StepEvent& e) { return e.stop || e.cur_step <= 1; }

FrameTokens frame_tokens(const StepEvent& e) {
  FrameTokens f;
  if (is_last_step(e)) {
    f.ids = e.argmax;
    f.settled.assign(e.argmax.size(), 1);
  } else {
    f.ids = e.canvas_out;
    f.settled.assign(e.accepted.begin(), e.accepted.end());
  }
  return f;
}

std::string layout_frame(const std::vector<FrameCell>& cells, const std::string& status, int columns, bool color) {
  const int width = columns > 2 ? columns - 1 : 1;
  std::string out;
  int col = 0;
  for (const FrameCell& cell : cells) {
    const int w = display_width(cell.text);
    if (col > 0 && col + w > width) {
      out += '\n';
      col = 0;
    }
    if (color) {
      out += cell.settled ? ansi::kAccepted : ansi::kDim;
      out += cell.text;
      out += ansi::kReset;
    } else {
      out += cell.settled ? cell.text : std::string(size_t(w), '_');
    }
    col += w;
  }
  out += '\n';
  if (color)
    out += std::string(ansi::kStatus) + "[" + status + "]" + ansi::kReset;
  else
    out += "[" + status + "]";
  return out;
}

}  // namespace dgemma::cli
