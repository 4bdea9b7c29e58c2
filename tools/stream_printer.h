#pragma once
// Presents a running generate() on stdout (used by `run` and `chat`):
//  * text:      decoded text, printed as each canvas commits (trimmed at the
//               first EOS and to -n tokens: docs/model.md §3.4 keeps full canvases,
//               the API layer trims);
//  * visualize: on a TTY the canvas being denoised is redrawn in place each
//               step (accepted tokens bold green, noise dimmed, with the step
//               counter and mean entropy; NO_COLOR: noise as '_'); the last
//               frame of a canvas shows its argmax, i.e. what it commits. On
//               a TERM=dumb terminal only the text (no cursor movement);
//               otherwise (a pipe) one plain line per step ("_" for noise)
//               followed by the final text;
//  * json:      one JSON object per line: {"event":"step",...,"argmax":[...],
//               "final":bool}, {"event":"canvas",...,"text":...},
//               {"event":"done",...}.
// Every write is checked: a failed write to `out` throws dgemma::Error, which
// stops generation. With `interruptible`, a pending Ctrl-C (interrupt.h)
// cancels generation.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "generate/generate.h"
#include "generate/generation_stats.h"
#include "generate/token_stream.h"
#include "terminal.h"
#include "tokenizer/tokenizer.h"

namespace dgemma::cli {

enum class StreamMode { kText, kVisualize, kJson };

struct StreamOptions {
  StreamMode mode = StreamMode::kText;
  TerminalCaps terminal;       // of `out`: terminal_caps(out)
  bool interruptible = false;  // cancel generation on a pending SIGINT
  bool special = false;        // keep special tokens (<pad>, <|channel>, ...) in the text
  int64_t max_tokens = -1;
  std::vector<int32_t> eos_token_ids;
  int64_t max_denoising_steps = 0;
};

class StreamPrinter : public GenerationObserver {
 public:
  StreamPrinter(const Tokenizer& tokenizer, FILE* out, StreamOptions options);

  // Starts the clock; call right before generate().
  void start() { clock_.start(); }
  void on_step(const StepEvent& e) override;
  void on_canvas(const CanvasEvent& e) override;
  bool cancelled() override;
  // After generate(): prints the rest of the text (json: the done event, with
  // `extra` fields appended) and returns the run's figures.
  GenerationStats finish(const GenerationResult& result, int64_t canvas_length, const json::Object& extra = {});

  // Visible tokens (before the first EOS, at most max_tokens).
  const std::vector<int32_t>& tokens() const { return tokens_.tokens(); }
  StopReason stop_reason() const { return tokens_.stop_reason(); }

 private:
  std::string piece(int32_t id) const;  // one token for the canvas display
  void emit_json(const json::Value& v);
  void write(const std::string& s);  // fwrite + fflush + check

  const Tokenizer& tokenizer_;
  FILE* out_;
  StreamOptions options_;
  TokenStream tokens_;
  TextStream text_;
  StatsClock clock_;
  std::unique_ptr<LiveRegion> live_;  // visualize on a TTY
};

}  // namespace dgemma::cli
