#include "stream_printer.h"

#include <cstdio>

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
    if (ch == '\n') out += "\xE2\x86\xB5";  // ↵
    else if (ch == '\r' || ch == '\t') out += ' ';
    else out += ch;
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
  if (options_.mode == StreamMode::kVisualize && options_.tty)
    live_ = std::make_unique<LiveRegion>(out_, terminal_columns(out_));
}

std::string StreamPrinter::piece(int32_t id) const {
  const int32_t one[1] = {id};
  std::string s = one_line(tokenizer_.decode(one, false));
  return s.empty() ? std::string("\xC2\xB7") : s;  // ·
}

void StreamPrinter::emit_json(const json::Value& v) {
  const std::string line = json::dump(v) + "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

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
      emit_json(v);
      return;
    }
    case StreamMode::kVisualize: break;
  }
  char status[160];
  std::snprintf(status, sizeof status, "canvas %lld step %lld/%lld  accepted %lld/%lld  mean entropy %.3f nats%s",
                (long long)e.canvas, (long long)(e.step + 1), (long long)options_.max_denoising_steps,
                (long long)e.n_accepted, (long long)L, double(e.mean_entropy), e.stop ? "  (stable+confident)" : "");
  if (live_) {
    std::string frame;
    for (int64_t i = 0; i < L; ++i) {
      frame += e.accepted[size_t(i)] ? ansi::kAccepted : ansi::kDim;
      frame += piece(e.canvas_out[size_t(i)]);
      frame += ansi::kReset;
    }
    frame += std::string("\n") + ansi::kStatus + "[" + status + "]" + ansi::kReset;
    live_->draw(frame);
    return;
  }
  std::string line = std::string(status) + " | ";
  for (int64_t i = 0; i < L; ++i) line += e.accepted[size_t(i)] ? piece(e.canvas_out[size_t(i)]) : std::string("_");
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void StreamPrinter::on_canvas(const CanvasEvent& e) {
  clock_.on_canvas();
  const std::span<const int32_t> fresh = tokens_.push(e.committed);
  const std::string text = text_.push(fresh);
  switch (options_.mode) {
    case StreamMode::kText:
      std::fwrite(text.data(), 1, text.size(), out_);
      std::fflush(out_);
      return;
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
      if (live_) live_->print(sanitize_for_terminal(text));
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
    case StreamMode::kText: {
      const std::string s = rest + "\n";
      std::fwrite(s.data(), 1, s.size(), out_);
      break;
    }
    case StreamMode::kVisualize: {
      if (live_) {
        live_->print(sanitize_for_terminal(rest) + "\n");
      } else {
        const std::string s = text_.text() + "\n";
        std::fwrite(s.data(), 1, s.size(), out_);
      }
      break;
    }
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
  std::fflush(out_);
  return stats;
}

}  // namespace dgemma::cli
