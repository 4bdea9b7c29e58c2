#pragma once
// A synthetic slice of the real 26B-A4B model for speed measurements: the
// real checkpoint's config (docs/model.md §1.1: hidden 2816, 16 heads, head
// dims 256/512, 128 experts top-8, vocab 262144; installed with the binary,
// core/data_dir.h) cut to a few layers (sliding, ..., full: both head dims),
// with random bf16 weights. Written by `dgemma bench slice` and the
// benchmarks. Two layers take 4.7 GB on disk; the random values only need to
// route tokens to varied experts (all-zero weights would send every token to
// experts 0..7). With vision layers the slice also carries the vision tower
// (docs/model.md §7.1) at the published shapes (hidden 1152, 16 heads of 72,
// MLP 4304, patch 16, pooling 3, position table 10240, standardization), for
// `dgemma bench vision`.
#include <cstdint>
#include <string>

namespace dgemma {

// The run-time data file holding the real model's config.json
// (tests/data/configs/diffusiongemma-26b-a4b.config.json in the source tree).
inline constexpr const char* kRealModelConfig = "diffusiongemma-26b-a4b.config.json";

// The published tower's sizes that its abbreviated vision_config leaves out
// (docs/model.md §7.1), written out in full in a slice's config.
inline constexpr int kRealVisionIntermediate = 4304;
inline constexpr int kRealVisionPositions = 10240;

// config.json text of the real model cut to `layers` layers: the real
// pattern (5 sliding, 1 full) with the last layer full, as the reference forces;
// with vision_layers > 0 the vision_config is complete and cut to that many
// layers (0: as published, and the slice stores no tower).
std::string slice_config_json(int layers, int vision_layers = 0);

// Writes config.json + model.safetensors of the slice to `dir` unless a
// slice with the same config is already there. Returns dir.
std::string ensure_model_slice(const std::string& dir, int layers = 2, uint64_t seed = 1, int vision_layers = 0);

}  // namespace dgemma
