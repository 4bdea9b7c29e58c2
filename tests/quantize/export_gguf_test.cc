// `dgemma quantize … OUT.gguf` (quantize/export_gguf.h): a random checkpoint
// written as GGUF and read back with the GGUF reader. The file has the
// published layout's names and dimension order, keys that give back the
// source's config, the file type's tensor types, and each tensor's bytes are
// exactly the ggml quantizer applied to the source's rows; a quantized
// (NF4) source goes through its dequantized values; memory stays bounded
// while a large embedding is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../model/random_checkpoint.h"
#include "checkpoint/gguf_config.h"
#include "checkpoint/gguf_names.h"
#include "checkpoint/tensor_names.h"
#include "dgemma/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "quant_test_util.h"
#include "quantize/export.h"
#include "quantize/export_gguf.h"
#include "quantize/ggml_quantize.h"
#include "quantize/quantizers.h"

namespace dgemma {
namespace {

testing::RandomSpec small_spec() {
  testing::RandomSpec s;
  s.hidden = 256;  // K-quant rows, and fallbacks for the 64/32-long ones below
  s.heads = 4;
  s.kv_heads = 2;
  s.global_kv_heads = 1;
  s.head_dim = 32;
  s.global_head_dim = 64;
  s.intermediate = 64;
  s.moe_intermediate = 32;
  s.vocab = 300;
  return s;
}

GgufTokenizerData toy_tokenizer(int64_t vocab) {
  GgufTokenizerData t;
  for (int64_t i = 0; i < vocab; ++i) t.tokens.push_back(std::to_string(i).insert(0, 1, 't'));
  t.token_types.assign(size_t(vocab), 1);
  t.token_types[0] = 3;
  t.merges = {"t 1", "t1 0"};
  t.bos_id = 2;
  t.eos_id = 1;
  t.padding_id = 0;
  t.mask_id = 4;
  t.chat_template = "{{ messages }}";
  return t;
}

std::vector<float> rows_of(const TensorView& v) {
  std::vector<float> out(size_t(v.numel()));
  quant::FloatSource{v.dtype(), v.data, v.numel()}.read(0, v.numel(), out.data());
  return out;
}

const GgufTensorInfo* find_tensor(const GgufHeader& h, const std::string& name) {
  for (const GgufTensorInfo& t : h.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

class ExportGguf : public ::testing::TestWithParam<quant::GgufFtype> {};

TEST_P(ExportGguf, ReadsBackWithTheSourcesConfigAndQuantizedRows) {
  const testing::RandomSpec spec = small_spec();
  const std::string src = testing::write_random_checkpoint("gguf_export", spec);
  qtest::TempDir dir;
  const std::string out = dir.file("model.gguf");
  GgufExportOptions o;
  o.ftype = GetParam();
  o.threads = 2;
  o.tokenizer = toy_tokenizer(spec.vocab);
  const GgufExportReport r = export_gguf(src, out, o);
  const bool blocks = ggml_is_block(quant::gguf_ftype_info(GetParam()).default_type);
  EXPECT_EQ(r.quantized > 0, blocks);
  EXPECT_GT(r.plain, 0);
  if (blocks) {
    EXPECT_GT(r.rel_rms, 0.0);
    EXPECT_LT(r.rel_rms, GetParam() == quant::GgufFtype::kQ8_0 ? 0.01 : 0.1);
  }

  const auto file = GgufFile::open(out);
  const GgufHeader& h = file->header();
  const GgufKeys keys = file->keys();
  EXPECT_EQ(keys.string("general.architecture"), "diffusion-gemma");
  EXPECT_EQ(keys.integer("general.file_type"), int64_t(GetParam()));
  EXPECT_EQ(keys.find("diffusion-gemma.attention.head_count_kv")->elem_type, GgufValueType::kI32);
  EXPECT_EQ(keys.find("diffusion-gemma.block_count")->type, GgufValueType::kU32);
  EXPECT_EQ(keys.find("diffusion-gemma.rope.freq_base")->type, GgufValueType::kF32);
  EXPECT_EQ(keys.strings("tokenizer.ggml.tokens").size(), size_t(spec.vocab));
  EXPECT_EQ(keys.integer("tokenizer.ggml.mask_token_id"), 4);
  EXPECT_EQ(keys.string("tokenizer.chat_template"), "{{ messages }}");

  // The config the GGUF reader derives equals the source's.
  const TensorStore store = TensorStore::open_dir(src);
  const ModelConfig want = load_model_config(src + "/config.json");
  const GgufTensorInfo* rope = find_tensor(h, "rope_freqs.weight");
  ASSERT_NE(rope, nullptr);
  std::vector<float> freqs(size_t(rope->ne[0]));
  std::memcpy(freqs.data(), file->data(*rope), freqs.size() * 4);
  const ModelConfig got = gguf_model_config(keys, h.tensors, &freqs);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.hidden_size, want.hidden_size);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.global_head_dim, want.global_head_dim);
  EXPECT_EQ(got.num_experts, want.num_experts);
  EXPECT_EQ(got.canvas_length, want.canvas_length);
  EXPECT_EQ(got.rope_full.rotated_pairs(got.global_head_dim), want.rope_full.rotated_pairs(want.global_head_dim));
  for (int l = 0; l < want.num_layers; ++l) {
    EXPECT_EQ(got.layer(l).type, want.layer(l).type);
    EXPECT_EQ(got.layer(l).num_kv_heads, want.layer(l).num_kv_heads);
    EXPECT_EQ(got.layer(l).has_v_proj, want.layer(l).has_v_proj);
  }

  // Every expected tensor once, under its GGUF name, ne reversed, with the
  // file type's type and the quantizer's bytes of the source rows.
  std::vector<quant::GgufTypeTensor> plan;
  for (const GgufTensorInfo& t : h.tensors) plan.push_back({t.name, t.ne});
  const std::vector<GgmlType> types =
      quant::gguf_tensor_types(GetParam(), plan, {want.num_layers, want.num_experts, 2});
  size_t written = 1;  // rope_freqs
  for (const ExpectedTensor& ex : expected_tensors(want)) {
    const std::optional<std::string> name = canonical_to_gguf(ex.name);
    if (!name) continue;
    ++written;
    const GgufTensorInfo* t = find_tensor(h, *name);
    ASSERT_NE(t, nullptr) << *name;
    ASSERT_EQ(t->ne, std::vector<int64_t>(ex.shape.rbegin(), ex.shape.rend())) << *name;
    EXPECT_EQ(t->type, types[size_t(t - h.tensors.data())]) << *name;
    const TensorView* v = store.find(ex.name);
    ASSERT_NE(v, nullptr) << ex.name;
    const std::vector<float> x = rows_of(*v);
    const int64_t cols = t->ne[0], rows = int64_t(x.size()) / cols;
    std::vector<uint8_t> want_bytes(size_t(rows) * ggml_row_bytes(t->type, cols));
    quant::ggml_quantize_rows(t->type, x.data(), rows, cols, want_bytes.data(), 1);
    ASSERT_EQ(t->nbytes, want_bytes.size()) << *name;
    EXPECT_EQ(0, std::memcmp(file->data(*t), want_bytes.data(), want_bytes.size())) << *name;
  }
  EXPECT_EQ(h.tensors.size(), written);
  EXPECT_EQ(find_tensor(h, "output.weight"), nullptr);  // tied to token_embd
}

INSTANTIATE_TEST_SUITE_P(FileTypes, ExportGguf,
                         ::testing::Values(quant::GgufFtype::kQ4_K_M, quant::GgufFtype::kQ8_0, quant::GgufFtype::kQ4_0,
                                           quant::GgufFtype::kF16),
                         [](const ::testing::TestParamInfo<quant::GgufFtype>& i) {
                           return std::string(quant::gguf_ftype_info(i.param).name);
                         });

TEST(ExportGgufSources, QuantizedSourceGoesThroughItsDequantizedValues) {
  // An NF4 checkpoint exported to GGUF F32 holds exactly the values the
  // engine dequantizes (its dequantized F32 copy's bytes).
  const testing::RandomSpec spec = small_spec();
  const std::string src = testing::write_random_checkpoint("gguf_export_nf4_src", spec);
  qtest::TempDir dir;
  ExportOptions eo;
  eo.format = ExportFormat::kNf4;
  export_quantized(src, dir.file("nf4"), eo);
  export_dequantized(dir.file("nf4"), dir.file("deq"));
  GgufExportOptions o;
  o.ftype = quant::GgufFtype::kF32;
  o.tokenizer = toy_tokenizer(spec.vocab);
  export_gguf(dir.file("nf4"), dir.file("m.gguf"), o);
  const auto file = GgufFile::open(dir.file("m.gguf"));
  const TensorStore deq = TensorStore::open_dir(dir.file("deq"));
  int compared = 0;
  for (const GgufTensorInfo& t : file->header().tensors) {
    const std::optional<std::string> canonical = gguf_to_canonical(t.name);
    if (!canonical) continue;
    const TensorView* v = deq.find(*canonical);
    ASSERT_NE(v, nullptr) << *canonical;
    ASSERT_EQ(t.nbytes, v->nbytes()) << t.name;
    EXPECT_EQ(0, std::memcmp(file->data(t), v->data, t.nbytes)) << t.name;
    ++compared;
  }
  EXPECT_GT(compared, 20);
}

TEST(ExportGgufSources, BadInputIsAClearError) {
  const testing::RandomSpec spec = small_spec();
  const std::string src = testing::write_random_checkpoint("gguf_export_bad", spec);
  qtest::TempDir dir;
  GgufExportOptions o;
  o.tokenizer = toy_tokenizer(spec.vocab - 1);
  try {
    export_gguf(src, dir.file("m.gguf"), o);
    FAIL() << "a tokenizer smaller than the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens"), std::string::npos) << e.what();
  }
  o.tokenizer = toy_tokenizer(spec.vocab);
  o.tokenizer.mask_id = spec.vocab + 3;
  EXPECT_THROW(export_gguf(src, dir.file("m.gguf"), o), Error);
}

// A field of /proc/self/status in KiB ("VmHWM", "VmRSS"); -1 if absent.
long status_kib(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') v = std::strtol(line + n + 1, nullptr, 10);
  std::fclose(f);
  return v;
}

TEST(ExportGgufSources, PeakMemoryStaysBelowTheInput) {
  // A 64 MiB (BF16) embedding: the export holds a chunk of rows at a time
  // and hands the input's pages back, so the process's peak grows far less
  // than the tensor's fp32 copy (128 MiB) would take.
  testing::RandomSpec spec = small_spec();
  spec.vocab = 131072;
  const std::string src = testing::write_random_checkpoint("gguf_export_rss", spec);
  qtest::TempDir dir;
  GgufExportOptions o;
  o.ftype = quant::GgufFtype::kQ8_0;
  o.threads = 2;
  o.tokenizer = toy_tokenizer(spec.vocab);
  // Writing 5 to clear_refs resets the peak (VmHWM) to the current size.
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f || std::fputs("5", f) < 0 || std::fclose(f) != 0) GTEST_SKIP() << "cannot reset the peak RSS here";
  const long before = status_kib("VmRSS");
  export_gguf(src, dir.file("big.gguf"), o);
  const long peak = status_kib("VmHWM");
  ASSERT_GT(before, 0);
  std::printf("export: peak RSS %ld KiB over %ld KiB before\n", peak - before, before);
  EXPECT_LT(peak - before, 96 * 1024);
  EXPECT_GT(GgufFile::open(dir.file("big.gguf"))->file_size(), uint64_t(131072) * 256);
}

}  // namespace
}  // namespace dgemma
