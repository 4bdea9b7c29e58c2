#include "stream_printer.h"

#include <cstdio>

#include "canvas_frame.h"
#include "interrupt.h"
#include "output.h"

namespace dgemma::cli {
namespace {

json::Value int_array(std::span<const int32_t> ids) {
  json::Array a;
  a.reserve(ids.size());
  for (const int32_t t : ids) a.emplace_back(int64_t(t));
  return a;
}

// One token for a one-line display: newlines and controls made visible.
std::string one_line(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '\n')
      out += "\xE2\x86\xB5";  // ↵
    else if (ch == '\r' || ch == '\t')
      out += ' ';
    else
      out += ch;
  }
  return sanitize_for_terminal(out);
}

}  // namespace

StreamPrinter::StreamPrinter(const Tokenizer& tokenizer, FILE* out, StreamOptions options)
    : tokenizer_(tokenizer),
      out_(out),
      options_(std::move(options)),
      tokens_(options_.eos_token_ids, options_.max_tokens),
      text_(tokenizer, !options_.special) {
  if (options_.mode == StreamMode::kVisualize && options_.terminal.cursor) {
    watch_window_size();
    live_ = std::make_unique<LiveRegion>(out_, terminal_columns(out_), terminal_rows(out_));
  }
}

bool StreamPrinter::cancelled() { return options_.interruptible && interrupt_pending(); }

void StreamPrinter::write(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), out_);
  check_output(out_);
}

std::string StreamPrinter::piece(int32_t id) const {
  const int32_t one[1] = {id};
  std::string s = one_line(tokenizer_.decode(one, false));
  return s.empty() ? std::string("\xC2\xB7") : s;  // ·
}

void StreamPrinter::emit_json(const json::Value& v) { write(json::dump(v) + "\n"); }

void StreamPrinter::on_step(const StepEvent& e) {
  const int64_t L = int64_t(e.canvas_out.size());
  switch (options_.mode) {
    case StreamMode::kText: return;
    case StreamMode::kJson: {
      json::Value v = json::Object{};
      v.set("event", "step");
      v.set("canvas", e.canvas);
      v.set("step", e.step);
      v.set("cur_step", e.cur_step);
      v.set("temperature", double(e.temperature));
      v.set("n_accepted", e.n_accepted);
      v.set("mean_entropy", double(e.mean_entropy));
      v.set("stable", e.stable);
      v.set("confident", e.confident);
      v.set("stop", e.stop);
      v.set("canvas_out", int_array(e.canvas_out));
      json::Array acc;
      for (const uint8_t a : e.accepted) acc.emplace_back(int64_t(a));
      v.set("accepted", acc);
      v.set("argmax", int_array(e.argmax));  // on the final step: what the canvas commits
      v.set("final", is_last_step(e));
      emit_json(v);
      return;
    }
    case StreamMode::kVisualize: break;
  }
  if (!live_ && options_.terminal.tty) return;  // TERM=dumb: only the text
  const bool last = is_last_step(e);
  char status[200];
  std::snprintf(status, sizeof status, "canvas %lld step %lld/%lld  accepted %lld/%lld  mean entropy %.3f nats%s%s",
                (long long)e.canvas, (long long)(e.step + 1), (long long)options_.max_denoising_steps,
                (long long)e.n_accepted, (long long)L, double(e.mean_entropy), e.stop ? "  (stable+confident)" : "",
                last ? "  final: argmax commits" : "");
  const FrameTokens shown = frame_tokens(e);
  if (live_) {
    std::vector<FrameCell> cells;
    cells.reserve(shown.ids.size());
    for (size_t i = 0; i < shown.ids.size(); ++i) cells.push_back({piece(shown.ids[i]), shown.settled[i] != 0});
    live_->draw(layout_frame(cells, status, live_->columns(), options_.terminal.color));
    return;
  }
  std::string line = std::string(status) + " | ";
  for (size_t i = 0; i < shown.ids.size(); ++i) line += shown.settled[i] ? piece(shown.ids[i]) : std::string("_");
  write(line + "\n");
}

void StreamPrinter::on_canvas(const CanvasEvent& e) {
  clock_.on_canvas();
  const std::span<const int32_t> fresh = tokens_.push(e.committed);
  const std::string text = text_.push(fresh);
  switch (options_.mode) {
    case StreamMode::kText: write(text); return;
    case StreamMode::kJson: {
      json::Value v = json::Object{};
      v.set("event", "canvas");
      v.set("canvas", e.canvas);
      v.set("steps", e.steps);
      v.set("eos", e.eos);
      v.set("committed", int_array(e.committed));
      v.set("tokens", int_array(fresh));
      v.set("text", text);
      emit_json(v);
      return;
    }
    case StreamMode::kVisualize:
      if (live_) {
        live_->print(sanitize_for_terminal(text));
        check_output(out_);
      } else if (options_.terminal.tty) {
        write(sanitize_for_terminal(text));  // TERM=dumb
      }
      return;
  }
}

GenerationStats StreamPrinter::finish(const GenerationResult& result, int64_t canvas_length,
                                      const json::Object& extra) {
  if (!result.cancelled) tokens_.finish();
  const std::string rest = text_.flush();
  const std::string reason = result.cancelled ? "cancelled" : stop_reason_name(tokens_.stop_reason());
  GenerationStats stats = collect_stats(result, canvas_length, clock_, int64_t(tokens_.tokens().size()), reason);
  switch (options_.mode) {
    case StreamMode::kText: write(rest + "\n"); break;
    case StreamMode::kVisualize:
      if (live_) {
        live_->print(sanitize_for_terminal(rest) + "\n");
        check_output(out_);
      } else if (options_.terminal.tty) {
        write(sanitize_for_terminal(rest) + "\n");  // TERM=dumb
      } else {
        write(text_.text() + "\n");
      }
      break;
    case StreamMode::kJson: {
      json::Value v = json::Object{};
      v.set("event", "done");
      v.set("text", text_.text());
      v.set("tokens", int_array(tokens_.tokens()));
      v.set("generated_tokens", int64_t(tokens_.tokens().size()));
      v.set("prompt_tokens", stats.prompt_tokens);
      v.set("canvases", stats.canvases);
      json::Array steps;
      for (const int64_t s : stats.steps_per_canvas) steps.emplace_back(s);
      v.set("steps_per_canvas", steps);
      v.set("decoder_forwards", stats.decoder_forwards);
      v.set("tokens_per_forward", double(result.tokens_per_forward));
      v.set("stop_reason", reason);
      v.set("seconds", stats.seconds);
      v.set("first_token_seconds", stats.first_token_seconds);
      v.set("tokens_per_second", stats.tokens_per_second());
      v.set("positions_per_second", stats.positions_per_second());
      v.set("peak_rss_bytes", stats.peak_rss_bytes);
      for (const auto& [k, val] : extra) v.set(k, val);
      emit_json(v);
      break;
    }
  }
  return stats;
}

}  // namespace dgemma::cli
