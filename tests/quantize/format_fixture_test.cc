// The quantized-format readers against checkpoints whose tensor bytes are
// written by hand here from docs/formats.md (§2 bitsandbytes NF4, §3 ModelOpt
// NVFP4, §4 MLX affine), with expected values computed in the test from the
// spec's own tables. Our quantizers are not involved, so a bug shared by a
// writer and a reader cannot pass.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "backend/cpu/quant_kernels.h"
#include "quant_test_util.h"
#include "quantize/resolve.h"

namespace dgemma {
namespace {

using qtest::bytes_of;
using qtest::expect_error;
using qtest::RawTensor;
using qtest::TempDir;
using qtest::write_fixture;

// docs/formats.md §2.2 table.
const float kNf4[16] = {-1.0f,
                        -0.6961928009986877f,
                        -0.5250730514526367f,
                        -0.39491748809814453f,
                        -0.28444138169288635f,
                        -0.18477343022823334f,
                        -0.09105003625154495f,
                        0.0f,
                        0.07958029955625534f,
                        0.16093020141124725f,
                        0.24611230194568634f,
                        0.33791524171829224f,
                        0.44070982933044434f,
                        0.5626170039176941f,
                        0.7229568362236023f,
                        1.0f};
// docs/formats.md §3.3: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign.
const float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// Bytes whose nibbles, high first, are 0, 1, ..., 15 (repeated).
std::vector<uint8_t> ascending_high_first(size_t n) {
  const uint8_t pat[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = pat[i % 8];
  return b;
}

struct Loaded {
  std::unique_ptr<TensorStore> store;
  std::optional<QuantContext> ctx;
  std::optional<WeightRef> ref;
};

Loaded load(const std::string& dir, const ExpectedTensor& ex) {
  Loaded l;
  l.store = std::make_unique<TensorStore>(TensorStore::open_dir(dir));
  l.ctx = detect_quantization(*l.store);
  if (l.ctx) l.ref = resolve_quantized(*l.ctx, ex);
  return l;
}

// Row r of a bound quantized weight, by the reference and by the fast path
// (which must agree bit for bit).
std::vector<float> row_of(const WeightRef& w, int64_t r) {
  const QuantizedWeight& q = *w.quant;
  std::vector<float> ref(size_t(q.cols)), fast(size_t(q.cols));
  dequantize_reference(q, r, 0, q.cols, ref.data());
  cpu::dequantize_row(*cpu::cpu_level_kernels(default_isa()).quant, q, r, 0, q.cols, fast.data());
  for (int64_t c = 0; c < q.cols; ++c) EXPECT_EQ(ref[size_t(c)], fast[size_t(c)]) << "row " << r << " col " << c;
  return ref;
}

const char* kBnbConfig = R"({"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true,
  "bnb_4bit_quant_type": "nf4"}})";

std::vector<RawTensor> bnb_plain_tensors(const std::string& name, std::vector<int64_t> /*shape*/,
                                         std::vector<uint8_t> codes, std::vector<float> absmax,
                                         const std::string& state) {
  std::vector<float> qmap(kNf4, kNf4 + 16);
  return {{name, DType::kU8, {int64_t(codes.size()), 1}, codes},
          {name + ".absmax", DType::kF32, {int64_t(absmax.size())}, bytes_of(absmax)},
          {name + ".quant_map", DType::kF32, {16}, bytes_of(qmap)},
          {name + ".quant_state.bitsandbytes__nf4", DType::kU8, {int64_t(state.size())}, bytes_of(state)}};
}

TEST(Nf4Fixture, TwoBlocksHighNibbleFirst) {
  TempDir dir;
  const std::string name = "m.layers.0.self_attn.q_proj.weight";
  std::vector<uint8_t> codes = ascending_high_first(32);
  const uint8_t desc[8] = {0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10};  // 15, 14, ..., 0
  for (int i = 0; i < 32; ++i) codes.push_back(desc[i % 8]);
  write_fixture(dir.path(),
                bnb_plain_tensors(name, {2, 64}, codes, {2.0f, 0.5f},
                                  R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64]})"),
                kBnbConfig);
  Loaded l = load(dir.path(), {name, {2, 64}, Component::kAttention, {}});
  ASSERT_TRUE(l.ctx);
  EXPECT_EQ(l.ctx->kind, CheckpointQuant::kBitsAndBytes);
  ASSERT_TRUE(l.ref && l.ref->quant);
  EXPECT_EQ(l.ref->dtype, DType::kBF16);  // the quant state's "dtype"
  EXPECT_EQ(l.ref->shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(l.ref->quant->stored_names.size(), 4u);
  std::vector<float> r0 = row_of(*l.ref, 0), r1 = row_of(*l.ref, 1);
  for (int c = 0; c < 64; ++c) {
    EXPECT_EQ(r0[size_t(c)], kNf4[c % 16] * 2.0f) << c;
    EXPECT_EQ(r1[size_t(c)], kNf4[15 - c % 16] * 0.5f) << c;
  }
  EXPECT_EQ(r0[0], -2.0f);  // code 0 = -1.0, absmax 2
  EXPECT_EQ(r1[0], 0.5f);   // code 15 = 1.0, absmax 0.5
}

TEST(Nf4Fixture, DoubleQuantScales) {
  TempDir dir;
  const std::string name = "m.layers.0.mlp.up_proj.weight";
  // Nested code book map[j] = (j - 128) / 128, nested scale 0.5, offset 0.25:
  // scale[b] = map[absmax[b]] * 0.5 + 0.25 (docs/formats.md §2.4).
  std::vector<float> nmap(256);
  for (int j = 0; j < 256; ++j) nmap[size_t(j)] = float(j - 128) / 128.0f;
  const std::string state = R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [4, 64],
    "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.25})";
  std::vector<float> qmap(kNf4, kNf4 + 16);
  write_fixture(dir.path(),
                {{name, DType::kU8, {128, 1}, ascending_high_first(128)},
                 {name + ".absmax", DType::kU8, {4}, {0, 255, 128, 10}},
                 {name + ".quant_map", DType::kF32, {16}, bytes_of(qmap)},
                 {name + ".nested_absmax", DType::kF32, {1}, bytes_of(std::vector<float>{0.5f})},
                 {name + ".nested_quant_map", DType::kF32, {256}, bytes_of(nmap)},
                 {name + ".quant_state.bitsandbytes__nf4", DType::kU8, {int64_t(state.size())}, bytes_of(state)}},
                kBnbConfig);
  Loaded l = load(dir.path(), {name, {4, 64}, Component::kDenseMlp, {}});
  ASSERT_TRUE(l.ref && l.ref->quant);
  EXPECT_TRUE(l.ref->quant->double_quant);
  EXPECT_EQ(l.ref->dtype, DType::kF32);
  // Hand-computed: -1·0.5+0.25, (127/128)·0.5+0.25, 0·0.5+0.25, (-118/128)·0.5+0.25.
  const float scale[4] = {-0.25f, 0.74609375f, 0.25f, -0.2109375f};
  for (int r = 0; r < 4; ++r) {
    std::vector<float> v = row_of(*l.ref, r);
    for (int c = 0; c < 64; ++c) EXPECT_EQ(v[size_t(c)], kNf4[c % 16] * scale[r]) << r << "," << c;
  }
}

TEST(Nf4Fixture, BlocksStraddleRowsAndOddCount) {
  {  // [3, 40]: 120 elements in blocks of 64 + 56; row 1 spans both blocks.
    TempDir dir;
    const std::string name = "m.layers.0.self_attn.k_proj.weight";
    write_fixture(dir.path(),
                  bnb_plain_tensors(name, {3, 40}, ascending_high_first(60), {1.0f, 4.0f},
                                    R"({"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": [3, 40]})"),
                  kBnbConfig);
    Loaded l = load(dir.path(), {name, {3, 40}, Component::kAttention, {}});
    ASSERT_TRUE(l.ref && l.ref->quant);
    EXPECT_EQ(l.ref->dtype, DType::kF16);
    for (int r = 0; r < 3; ++r) {
      std::vector<float> v = row_of(*l.ref, r);
      for (int c = 0; c < 40; ++c) {
        const int i = r * 40 + c;
        EXPECT_EQ(v[size_t(c)], kNf4[i % 16] * (i < 64 ? 1.0f : 4.0f)) << i;
      }
    }
    // A run starting mid-row and mid-byte, crossing the block boundary.
    std::vector<float> part(11);
    cpu::dequantize_row(*cpu::cpu_level_kernels(default_isa()).quant, *l.ref->quant, 1, 19, 11, part.data());
    for (int t = 0; t < 11; ++t) EXPECT_EQ(part[size_t(t)], kNf4[(59 + t) % 16] * (59 + t < 64 ? 1.0f : 4.0f));
  }
  {  // [3, 21]: 63 elements, 32 bytes, the last low nibble is padding.
    TempDir dir;
    const std::string name = "m.layers.0.self_attn.k_proj.weight";
    write_fixture(
        dir.path(),
        bnb_plain_tensors(name, {3, 21}, ascending_high_first(32), {1.5f},
                          R"({"quant_type": "nf4", "blocksize": 64, "dtype": "torch.bfloat16", "shape": [3, 21]})"),
        kBnbConfig);
    Loaded l = load(dir.path(), {name, {3, 21}, Component::kAttention, {}});
    ASSERT_TRUE(l.ref && l.ref->quant);
    std::vector<float> v = row_of(*l.ref, 2);
    for (int c = 0; c < 21; ++c) EXPECT_EQ(v[size_t(c)], kNf4[(42 + c) % 16] * 1.5f) << c;
  }
}

TEST(Nf4Fixture, RejectsMalformedTensors) {
  const std::string name = "m.layers.0.self_attn.q_proj.weight";
  const ExpectedTensor ex{name, {2, 64}, Component::kAttention, {}};
  const std::string ok_state = R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64]})";
  {  // absmax with the wrong count
    TempDir dir;
    write_fixture(dir.path(), bnb_plain_tensors(name, {2, 64}, ascending_high_first(64), {1.0f, 1.0f, 1.0f}, ok_state),
                  kBnbConfig);
    expect_error([&] { load(dir.path(), ex); }, {name + ".absmax", "3 elements, expected 2"});
  }
  {  // a code book that is not NF4
    TempDir dir;
    auto t = bnb_plain_tensors(name, {2, 64}, ascending_high_first(64), {1.0f, 1.0f}, ok_state);
    t[2].bytes[4 * 3 + 3] ^= 0x01;  // exponent bit: the value changes by 4x
    write_fixture(dir.path(), t, kBnbConfig);
    expect_error([&] { load(dir.path(), ex); }, {name + ".quant_map", "entry 3", "not the NF4 value"});
  }
  {  // quant state shape disagrees with the config's shape
    TempDir dir;
    write_fixture(dir.path(),
                  bnb_plain_tensors(name, {2, 64}, ascending_high_first(64), {1.0f, 1.0f},
                                    R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [64, 2]})"),
                  kBnbConfig);
    expect_error([&] { load(dir.path(), ex); }, {"quant_state", "[64, 2]", "does not match", "[2, 64]"});
  }
  {  // fp4 is a different code book
    TempDir dir;
    auto t = bnb_plain_tensors(name, {2, 64}, ascending_high_first(64), {1.0f, 1.0f}, ok_state);
    t[3].name = name + ".quant_state.bitsandbytes__fp4";
    write_fixture(dir.path(), t, kBnbConfig);
    expect_error([&] { load(dir.path(), ex); }, {"bitsandbytes__fp4", "quant type \"fp4\""});
  }
  {  // unknown quant state field
    TempDir dir;
    write_fixture(
        dir.path(),
        bnb_plain_tensors(name, {2, 64}, ascending_high_first(64), {1.0f, 1.0f},
                          R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64], "foo": 1})"),
        kBnbConfig);
    expect_error([&] { load(dir.path(), ex); }, {"unknown quant state field \"foo\""});
  }
}

// ---- ModelOpt NVFP4 -----------------------------------------------------------

const char* kModeloptConfig = R"({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}})";
const char* kHfQuantConfig = R"({"producer": {"name": "modelopt", "version": "0"},
  "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                   "exclude_modules": ["lm_head", "*router*"]}})";

TEST(Nvfp4Fixture, LinearLowNibbleFirstWithE4m3Scales) {
  TempDir dir;
  const std::string m = "m.layers.0.self_attn.o_proj";
  // Row 0: column c has code c % 16 (column 2k in the low nibble of byte k).
  // Row 1: the nibbles swapped (column 2k has code 2k+1, column 2k+1 code 2k).
  std::vector<uint8_t> w;
  const uint8_t lo_first[8] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
  const uint8_t hi_first[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  for (int k = 0; k < 16; ++k) w.push_back(lo_first[k % 8]);
  for (int k = 0; k < 16; ++k) w.push_back(hi_first[k % 8]);
  // E4M3FN: 0x38 = 1.0, 0x40 = 2.0, 0x30 = 0.5, 0x3C = 1.5 (bias 7, 3 mantissa bits).
  write_fixture(dir.path(),
                {{m + ".weight", DType::kU8, {2, 16}, w},
                 {m + ".weight_scale", DType::kF8_E4M3, {2, 2}, {0x38, 0x40, 0x30, 0x3C}},
                 {m + ".weight_scale_2", DType::kF32, {}, bytes_of(std::vector<float>{0.25f})},
                 {m + ".input_scale", DType::kF32, {}, bytes_of(std::vector<float>{0.01f})},
                 {"m.layers.0.self_attn.k_proj.k_scale", DType::kF32, {}, bytes_of(std::vector<float>{1.0f})}},
                kModeloptConfig, kHfQuantConfig);
  Loaded l = load(dir.path(), {m + ".weight", {2, 32}, Component::kAttention, {}});
  ASSERT_TRUE(l.ctx);
  EXPECT_EQ(l.ctx->kind, CheckpointQuant::kModelOpt);
  EXPECT_TRUE(is_ignored_quant_tensor(*l.ctx, "m.layers.0.self_attn.k_proj.k_scale"));
  ASSERT_TRUE(l.ref && l.ref->quant);
  EXPECT_EQ(l.ref->quant->stored_names.size(), 4u);  // weight, weight_scale, weight_scale_2, input_scale
  const float s[2][2] = {{1.0f, 2.0f}, {0.5f, 1.5f}};
  std::vector<float> r0 = row_of(*l.ref, 0), r1 = row_of(*l.ref, 1);
  for (int c = 0; c < 32; ++c) {
    const int code1 = (c % 2 == 0) ? (c % 16) + 1 : (c % 16) - 1;
    EXPECT_EQ(r0[size_t(c)], kE2m1[c % 16] * s[0][c / 16] * 0.25f) << c;
    EXPECT_EQ(r1[size_t(c)], kE2m1[code1] * s[1][c / 16] * 0.25f) << c;
  }
  EXPECT_EQ(r0[7], 6.0f * 1.0f * 0.25f);
  EXPECT_EQ(r0[16 + 15], -6.0f * 2.0f * 0.25f);
}

// The byte at (expert e, projection p, row r, byte k) of the expert fixture.
uint8_t expert_byte(int e, int p, int r, int k) { return uint8_t((e * 37 + p * 11 + r * 5 + k * 3) & 0xFF); }

TEST(Nvfp4Fixture, PerExpertTensorsMapOntoFusedLayout) {
  TempDir dir;
  // gate_up [E=2, 2I=32, H=32], down [2, H=32, I=16] (docs/formats.md §3.2: gate is
  // the first half of gate_up's rows).
  const std::string base = "model.decoder.layers.0.experts.";
  const float g[2][3] = {{1.0f, 2.0f, 0.5f}, {4.0f, 8.0f, 0.125f}};  // gate, up, down per expert
  const char* proj[3] = {"gate_proj", "up_proj", "down_proj"};
  std::vector<RawTensor> t;
  for (int e = 0; e < 2; ++e)
    for (int p = 0; p < 3; ++p) {
      const int rows = p == 2 ? 32 : 16, cols = p == 2 ? 16 : 32;
      const std::string m = base + std::to_string(e) + "." + proj[p];
      std::vector<uint8_t> w;
      for (int r = 0; r < rows; ++r)
        for (int k = 0; k < cols / 2; ++k) w.push_back(expert_byte(e, p, r, k));
      t.push_back({m + ".weight", DType::kU8, {rows, cols / 2}, w});
      t.push_back({m + ".weight_scale",
                   DType::kF8_E4M3,
                   {rows, cols / 16},
                   std::vector<uint8_t>(size_t(rows * cols / 16), 0x38)});
      t.push_back({m + ".weight_scale_2", DType::kF32, {}, bytes_of(std::vector<float>{g[e][p]})});
    }
  write_fixture(dir.path(), t, kModeloptConfig, kHfQuantConfig);
  auto expected = [&](int e, int p, int r, int c) {
    const uint8_t b = expert_byte(e, p, r, c / 2);
    return kE2m1[(c % 2 == 0) ? (b & 0xF) : (b >> 4)] * g[e][p];
  };
  {
    Loaded l = load(dir.path(), {base + "gate_up_proj", {2, 32, 32}, Component::kExperts, {}});
    ASSERT_TRUE(l.ref && l.ref->quant);
    EXPECT_EQ(l.ref->quant->slices.size(), 4u);
    EXPECT_EQ(l.ref->quant->stored_names.size(), 12u);
    for (int e = 0; e < 2; ++e)
      for (int i = 0; i < 32; ++i) {
        std::vector<float> v = row_of(*l.ref, e * 32 + i);
        for (int c = 0; c < 32; ++c)
          EXPECT_EQ(v[size_t(c)], expected(e, i < 16 ? 0 : 1, i % 16, c)) << e << " " << i << " " << c;
      }
  }
  {
    Loaded l = load(dir.path(), {base + "down_proj", {2, 32, 16}, Component::kExperts, {}});
    ASSERT_TRUE(l.ref && l.ref->quant);
    for (int e = 0; e < 2; ++e)
      for (int h = 0; h < 32; ++h) {
        std::vector<float> v = row_of(*l.ref, e * 32 + h);
        for (int c = 0; c < 16; ++c) EXPECT_EQ(v[size_t(c)], expected(e, 2, h, c)) << e << " " << h << " " << c;
      }
  }
}

TEST(Nvfp4Fixture, RejectsInconsistentFiles) {
  const std::string m = "m.layers.0.self_attn.o_proj";
  const ExpectedTensor ex{m + ".weight", {2, 32}, Component::kAttention, {}};
  auto tensors = [&](std::vector<int64_t> scale_shape) {
    return std::vector<RawTensor>{{m + ".weight", DType::kU8, {2, 16}, std::vector<uint8_t>(32, 0x11)},
                                  {m + ".weight_scale", DType::kF8_E4M3, scale_shape, std::vector<uint8_t>(4, 0x38)},
                                  {m + ".weight_scale_2", DType::kF32, {}, bytes_of(std::vector<float>{1.0f})}};
  };
  {
    TempDir dir;
    write_fixture(dir.path(), tensors({4, 1}), kModeloptConfig, kHfQuantConfig);
    expect_error([&] { load(dir.path(), ex); }, {m + ".weight_scale", "[4, 1]", "expected [2, 2]"});
  }
  {  // quantized although excluded by the config
    TempDir dir;
    write_fixture(dir.path(), tensors({2, 2}), kModeloptConfig,
                  R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["*o_proj"]}})");
    expect_error([&] { load(dir.path(), ex); }, {m, "excludes it", "*o_proj"});
  }
  {  // other ModelOpt algorithms
    TempDir dir;
    write_fixture(dir.path(), tensors({2, 2}), "{}", R"({"quantization": {"quant_algo": "FP8"}})");
    expect_error([&] { load(dir.path(), ex); }, {"hf_quant_config.json", "quant_algo", "\"FP8\""});
  }
}

// ---- MLX affine -----------------------------------------------------------------

const char* kMlxConfig = R"({"quantization": {"group_size": 32, "bits": 4, "mode": "affine",
    "m.layers.0.self_attn.k_proj": {"group_size": 32, "bits": 8}},
  "quantization_config": {"group_size": 32, "bits": 4, "mode": "affine",
    "m.layers.0.self_attn.k_proj": {"group_size": 32, "bits": 8}}})";

std::vector<uint8_t> bf16_bytes(std::vector<uint16_t> v) { return bytes_of(v); }

std::vector<RawTensor> mlx_tensors() {
  // q_proj [2, 64], 4 bits, group 32: u32 words 0x76543210, 0xFEDCBA98 give
  // elements 0..15 (element j of a word in bits 4j..4j+3), written as
  // little-endian bytes.
  std::vector<uint8_t> q4;
  for (int w = 0; w < 16; ++w) {
    const uint8_t lo[4] = {0x10, 0x32, 0x54, 0x76}, hi[4] = {0x98, 0xBA, 0xDC, 0xFE};
    for (int b = 0; b < 4; ++b) q4.push_back(w % 2 == 0 ? lo[b] : hi[b]);
  }
  // k_proj [2, 32], 8 bits: element j = 8·j (4 per word, LSB first).
  std::vector<uint8_t> q8;
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 32; ++j) q8.push_back(uint8_t(8 * j));
  // bf16: 0.5 = 0x3F00, 2.0 = 0x4000, 0.25 = 0x3E80, 1.0 = 0x3F80, -1.0 = 0xBF80,
  // -4.0 = 0xC080, 0.125 = 0x3E00, -16.0 = 0xC180.
  const std::string p = "m.layers.0.self_attn.";
  return {{p + "q_proj.weight", DType::kU32, {2, 8}, q4},
          {p + "q_proj.scales", DType::kBF16, {2, 2}, bf16_bytes({0x3F00, 0x4000, 0x3E80, 0x3F80})},
          {p + "q_proj.biases", DType::kBF16, {2, 2}, bf16_bytes({0xBF80, 0x3F00, 0xC080, 0x0000})},
          {p + "k_proj.weight", DType::kU32, {2, 8}, q8},
          {p + "k_proj.scales", DType::kBF16, {2, 1}, bf16_bytes({0x3E00, 0x3F80})},
          {p + "k_proj.biases", DType::kBF16, {2, 1}, bf16_bytes({0xC180, 0x3F00})}};
}

TEST(MlxFixture, AffineFourAndEightBitWithOverride) {
  TempDir dir;
  write_fixture(dir.path(), mlx_tensors(), kMlxConfig);
  const std::string p = "m.layers.0.self_attn.";
  {
    Loaded l = load(dir.path(), {p + "q_proj.weight", {2, 64}, Component::kAttention, {}});
    ASSERT_TRUE(l.ctx);
    EXPECT_EQ(l.ctx->kind, CheckpointQuant::kMlx);  // docs/formats.md §7: before quantization_config
    ASSERT_TRUE(l.ref && l.ref->quant);
    EXPECT_EQ(l.ref->dtype, DType::kBF16);
    const float s[2][2] = {{0.5f, 2.0f}, {0.25f, 1.0f}}, b[2][2] = {{-1.0f, 0.5f}, {-4.0f, 0.0f}};
    for (int r = 0; r < 2; ++r) {
      std::vector<float> v = row_of(*l.ref, r);
      for (int c = 0; c < 64; ++c) EXPECT_EQ(v[size_t(c)], s[r][c / 32] * float(c % 16) + b[r][c / 32]) << r << c;
    }
  }
  {
    Loaded l = load(dir.path(), {p + "k_proj.weight", {2, 32}, Component::kAttention, {}});
    ASSERT_TRUE(l.ref && l.ref->quant);
    EXPECT_EQ(l.ref->quant->bits, 8);
    const float s[2] = {0.125f, 1.0f}, b[2] = {-16.0f, 0.5f};
    for (int r = 0; r < 2; ++r) {
      std::vector<float> v = row_of(*l.ref, r);
      for (int c = 0; c < 32; ++c) EXPECT_EQ(v[size_t(c)], s[r] * float(8 * c) + b[r]) << r << c;
    }
  }
}

TEST(MlxFixture, ConfigMustAgreeWithShapes) {
  const std::string p = "m.layers.0.self_attn.";
  {  // no override for the 8-bit module: the top level says 4 bits
    TempDir dir;
    write_fixture(dir.path(), mlx_tensors(), R"({"quantization": {"group_size": 32, "bits": 4}})");
    expect_error(
        [&] {
          load(dir.path(), {p + "k_proj.weight", {2, 32}, Component::kAttention, {}});
        },
        {p + "k_proj.weight", "shapes imply bits 8, group_size 32", "gives bits 4, group_size 32"});
  }
  {
    TempDir dir;
    write_fixture(dir.path(), mlx_tensors(), R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4"}})");
    expect_error(
        [&] {
          load(dir.path(), {p + "q_proj.weight", {2, 64}, Component::kAttention, {}});
        },
        {"config.json", "mode", "\"mxfp4\""});
  }
  {  // without any config entry the format is recognized from the tensors
    TempDir dir;
    write_fixture(dir.path(), mlx_tensors(), "{}");
    Loaded l = load(dir.path(), {p + "k_proj.weight", {2, 32}, Component::kAttention, {}});
    ASSERT_TRUE(l.ctx && l.ref && l.ref->quant);
    EXPECT_EQ(l.ctx->kind, CheckpointQuant::kMlx);
    EXPECT_EQ(l.ref->quant->bits, 8);
  }
}

TEST(QuantDetection, MethodsAndRejections) {
  TempDir dir;
  write_fixture(dir.path(), {{"x", DType::kF32, {1}, bytes_of(std::vector<float>{1.0f})}}, "{}");
  TensorStore store = TensorStore::open_dir(dir.path());
  EXPECT_FALSE(detect_quantization(store));
  auto detect = [&](const std::string& cfg) {
    json::Value v = json::parse(cfg);
    return detect_quantization(store, &v, "config.json", nullptr, "");
  };
  expect_error([&] { detect(R"({"quantization_config": {"quant_method": "gptq"}})"); },
               {"config.json: quantization_config.quant_method", "\"gptq\" is not supported"});
  expect_error([&] { detect(R"({"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": true}})"); },
               {"load_in_8bit", "8-bit"});
  auto q =
      detect(R"({"dtype": "float16", "quantization_config": {"quant_method": "modelopt", "ignore": ["lm_head"]}})");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->kind, CheckpointQuant::kModelOpt);
  EXPECT_EQ(q->default_dtype, DType::kF16);
  ASSERT_TRUE(q->excluded_by("lm_head"));
  EXPECT_FALSE(q->excluded_by("model.decoder.layers.0.experts.0.gate_proj"));
}

}  // namespace
}  // namespace dgemma
