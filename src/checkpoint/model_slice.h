#pragma once
// A synthetic slice of the real 26B-A4B model for speed measurements: the
// real checkpoint's config (docs/model.md §1.1: hidden 2816, 16 heads, head
// dims 256/512, 128 experts top-8, vocab 262144; installed with the binary,
// core/data_dir.h) cut to a few layers (sliding, ..., full: both head dims),
// with random bf16 weights. Written by `dgemma bench slice` and the
// benchmarks. Two layers take 4.7 GB on disk; the random values only need to
// route tokens to varied experts (all-zero weights would send every token to
// experts 0..7).
#include <cstdint>
#include <string>

namespace dgemma {

// The run-time data file holding the real model's config.json
// (tests/data/configs/diffusiongemma-26b-a4b.config.json in the source tree).
inline constexpr const char* kRealModelConfig = "diffusiongemma-26b-a4b.config.json";

// config.json text of the real model cut to `layers` layers: the real
// pattern (5 sliding, 1 full) with the last layer full, as the reference
// forces; and its vision tower cut to `vision_layers` layers at the real
// width (docs/model.md §7.1; 0: no tower). The vision_config stays as
// abbreviated as the real one: loading reads the sizes it leaves out off the
// tensors.
std::string slice_config_json(int layers, int vision_layers = 2);

// Writes config.json + model.safetensors of the slice to `dir` unless a
// slice with the same config is already there. Returns dir. The tower's
// tensors take the published tower's sizes (checkpoint/vision_shapes.h).
std::string ensure_model_slice(const std::string& dir, int layers = 2, uint64_t seed = 1, int vision_layers = 2);

}  // namespace dgemma
