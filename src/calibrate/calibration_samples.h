#pragma once
// The calibration set of `dgemma quantize --calibrate` (docs/formats.md §3.5):
// sample files read into texts or token ids, then cut to the sample count and
// length the calibration runs on.
#include <cstdint>
#include <string>
#include <vector>

namespace dgemma {

// Texts, one per sample: either one per non-empty line, or, when the first
// non-blank character of the file is '{', JSON lines each holding an object
// with a string field "text" (other fields are ignored). `file` names the
// source in errors (with the line number).
std::vector<std::string> read_calibration_texts(const std::string& content, const std::string& file);

// Token ids, one sample per non-empty line, as `dgemma tokenize` prints them:
// ids separated by spaces or commas, or a JSON object {"ids": [...]} (what
// `tokenize --jsonl` prints). Ids are checked against `vocab_size`.
std::vector<std::vector<int32_t>> read_calibration_ids(const std::string& content, const std::string& file,
                                                       int64_t vocab_size);

// The first `max_samples` non-empty samples, each cut to its first
// `seq_len` tokens (no padding: samples shorter than that stay short).
// Throws when nothing is left.
std::vector<std::vector<int32_t>> fit_calibration_samples(std::vector<std::vector<int32_t>> samples,
                                                          int64_t max_samples, int64_t seq_len,
                                                          const std::string& file);

// The decoder canvas of sample `sample` (docs/formats.md §3.5): token k is
// splitmix64(seed · 0x9E3779B97F4A7C15 + sample · length + k) mod vocab_size
// (64-bit wrapping arithmetic), uniform over the vocabulary like the
// torch.randint canvas of the reference's training forward, but repeatable.
std::vector<int32_t> calibration_canvas(uint64_t seed, uint64_t sample, int64_t length, int64_t vocab_size);

// SHA-256 (lowercase hex) of the samples as calibrated: for each sample its
// length then its ids, all as little-endian 32-bit integers. Identifies the
// calibration set whatever file format or tokenizer produced it.
std::string calibration_set_sha256(const std::vector<std::vector<int32_t>>& samples);

}  // namespace dgemma
