// ReplayDraws: feeds generate() the random tensors recorded from the
// reference run (golden README "Random draws in generate(): order and
// meaning"). Kept apart from draws.cc because it is the only draw source
// that reads files.
#include <cstdio>
#include <cstring>
#include <string>

#include "dgemma/error.h"
#include "generate/draws.h"
#include "io/safetensors.h"

namespace dgemma {
namespace {

std::string draw_name(size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "draw.%03zu", index);
  return buf;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

std::vector<int64_t> read_ints(const TensorView& view, const std::string& where) {
  std::vector<int64_t> out(size_t(view.numel()));
  if (view.dtype() == DType::kI64) {
    std::memcpy(out.data(), view.data, out.size() * sizeof(int64_t));  // data may be unaligned
  } else if (view.dtype() == DType::kI32) {
    for (size_t i = 0; i < out.size(); ++i) {
      int32_t v;
      std::memcpy(&v, view.data + i * sizeof v, sizeof v);
      out[i] = v;
    }
  } else {
    throw Error(where + ": dtype " + std::string(dtype_name(view.dtype())) + ", expected I64 or I32");
  }
  return out;
}

}  // namespace

ReplayDraws::ReplayDraws(const std::string& path) : path_(path) {
  const auto file = SafetensorsFile::open(path);
  size_t n_named = 0;
  for (const TensorInfo& info : file->tensors())
    if (info.name.rfind("draw.", 0) == 0) ++n_named;
  for (size_t i = 0;; ++i) {
    const std::string name = draw_name(i);
    const TensorInfo* info = file->find(name);
    if (info == nullptr) break;
    Draw d;
    d.name = name;
    d.shape = info->shape;
    d.values = read_ints(file->view(*info), "replay tape " + path + ": " + name);
    draws_.push_back(std::move(d));
  }
  if (draws_.empty()) throw Error("replay tape " + path + ": no draw.000 tensor");
  if (n_named != draws_.size())
    throw Error("replay tape " + path + ": " + std::to_string(n_named) + " draw.* tensors but only " +
                std::to_string(draws_.size()) + " are numbered contiguously from draw.000 (" +
                draw_name(draws_.size()) + " is missing)");
}

void ReplayDraws::take(const char* kind, bool column, int64_t canvas, int64_t step, int64_t vocab,
                       std::span<int32_t> out) {
  const int64_t n = int64_t(out.size());
  const std::vector<int64_t> expected = column ? std::vector<int64_t>{n, 1} : std::vector<int64_t>{1, n};
  const std::string context = std::string(kind) + " " + shape_string(expected) + " (canvas " + std::to_string(canvas) +
                              (step >= 0 ? ", step " + std::to_string(step) : "") + ")";
  if (next_ >= draws_.size())
    throw Error("replay tape " + path_ + ": ran out after " + std::to_string(draws_.size()) +
                " draws; generate() asked for " + draw_name(next_) + " = " + context);
  const Draw& d = draws_[next_];
  if (d.shape != expected)
    throw Error("replay tape " + path_ + ": " + d.name + " has shape " + shape_string(d.shape) + ", expected " +
                context);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = d.values[size_t(i)];
    if (v < 0 || v >= vocab)
      throw Error("replay tape " + path_ + ": " + d.name + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    out[size_t(i)] = int32_t(v);
  }
  ++next_;
}

void ReplayDraws::canvas_init(int64_t canvas, int64_t vocab, std::span<int32_t> out) {
  take("canvas_init", false, canvas, -1, vocab, out);
}

void ReplayDraws::sample(int64_t canvas, int64_t step, const float* /*processed_logits*/, int64_t vocab,
                         std::span<int32_t> out) {
  // The recorded multinomial result is the token id itself.
  take("sample", true, canvas, step, vocab, out);
}

void ReplayDraws::renoise(int64_t canvas, int64_t step, int64_t vocab, std::span<int32_t> out) {
  take("renoise", false, canvas, step, vocab, out);
}

void ReplayDraws::expect_exhausted() const {
  if (next_ != draws_.size())
    throw Error("replay tape " + path_ + ": generate() used " + std::to_string(next_) + " of " +
                std::to_string(draws_.size()) + " draws; next unused is " + draws_[next_].name);
}

}  // namespace dgemma
