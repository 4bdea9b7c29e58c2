#pragma once
// One frame of `run --visualize`: the canvas being denoised, token by token,
// laid out in rows that fit the terminal, plus a status row.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "generate/generate.h"

namespace dgemma::cli {

// Whether `e` is the last denoising step of its canvas: the stop condition
// held, or the remaining-steps counter reached its last step. Its frame shows
// the argmax, which is what the canvas commits (docs/model.md §3.2), instead of the
// renoised canvas that would feed a next step.
bool is_last_step(const StepEvent& e);

// The tokens a step's frame shows and which of them are settled: on the last
// step the argmax, all settled; before it the renoised canvas and the
// entropy-bound acceptance mask.
struct FrameTokens {
  std::span<const int32_t> ids;
  std::vector<uint8_t> settled;
};
FrameTokens frame_tokens(const StepEvent& e);

struct FrameCell {
  std::string text;  // one token, already made single-line and terminal-safe
  bool settled = false;
};

// Lays the cells out in rows of at most `columns` - 1 display columns (so a
// row never reaches the last column, where terminals disagree about wrapping),
// breaking only between tokens (a token wider than a row gets a row of its
// own and is clipped by the terminal), followed by a '\n' and the status row.
// With `color`, settled cells are bold green, unsettled ones dim and the
// status cyan; without it (NO_COLOR), unsettled cells print as '_' runs of
// their width so that the difference stays visible.
std::string layout_frame(const std::vector<FrameCell>& cells, const std::string& status, int columns, bool color);

}  // namespace dgemma::cli
