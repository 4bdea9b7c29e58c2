// A batch dimension over sequences (DiffusionGemma::decode_batch): one decoder pass over
// the canvases of several sequences, each with its own KV cache, gives each
// sequence exactly (bit for bit) the logits of a single pass with its cache
// swapped in — in fp32 and bf16, at 1 and 2 threads, at every CPU dispatch
// level, with and without self-conditioning (sparse and dense soft-embedding
// rows), for every decoder window variant (docs/model.md §2.4), with prompts shorter
// and longer than golden_a's sliding window (16). The CPU kernels compute
// every row of a row-wise op independently of the row count (one in-order
// FMA chain per output element), which is what makes this exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/inject_backend.h"
#include "dgemma/error.h"
#include "generate/sampler.h"
#include "model/diffusion_gemma.h"
#include "backend/cpu/cpu_backend.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

const std::string kGolden = std::string(DGEMMA_TEST_DATA) + "/golden_a";

std::vector<int32_t> prompt_of(int n, int vocab, int salt) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) p[size_t(k)] = (k * 37 + 11 + salt) % vocab;
  p[0] = 2;
  return p;
}

// One sequence: its cache (filled by an encoder pass over its prompt), its
// canvas and its self-conditioning input.
struct Sequence {
  KvCache cache;
  std::vector<int32_t> canvas;
  std::vector<float> self_conditioning;  // empty: none (a canvas's first step)
};

KvCache encoded(DiffusionGemma& m, const std::vector<int32_t>& prompt) {
  KvCache c = m.empty_cache();
  m.swap_cache(c);
  m.encode(prompt);
  m.swap_cache(c);
  return c;
}

std::vector<int32_t> canvas_of(const DiffusionGemma& m, int salt) {
  std::vector<int32_t> c(static_cast<size_t>(m.canvas_length()));
  for (size_t k = 0; k < c.size(); ++k) c[k] = int32_t((k * 13 + 5 + size_t(salt) * 7) % size_t(m.vocab_size()));
  return c;
}

// The single pass: the sequence's cache swapped in, decode(), swapped back.
std::vector<float> single(DiffusionGemma& m, Sequence& s) {
  std::vector<float> logits(static_cast<size_t>(m.canvas_length() * m.vocab_size()));
  m.swap_cache(s.cache);
  m.decode(s.canvas.data(), s.self_conditioning.empty() ? nullptr : s.self_conditioning.data(), logits.data());
  m.swap_cache(s.cache);
  return logits;
}

std::vector<std::vector<float>> batched(DiffusionGemma& m, std::vector<Sequence>& seqs) {
  std::vector<std::vector<float>> out(seqs.size(),
                                      std::vector<float>(static_cast<size_t>(m.canvas_length() * m.vocab_size())));
  std::vector<DecodeItem> items(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    items[i].cache = &seqs[i].cache;
    items[i].canvas = seqs[i].canvas.data();
    items[i].self_conditioning = seqs[i].self_conditioning.empty() ? nullptr : seqs[i].self_conditioning.data();
    items[i].logits = out[i].data();
  }
  m.decode_batch(items);
  return out;
}

// Three sequences with prompts of 5, 23 and 40 tokens (two past the window),
// different canvases; self-conditioning on the first and last: the first's
// from an earlier pass (dense soft-embedding rows), the last's peaked on one
// token in every other row (sparse rows) — the middle one has none, so the
// batch mixes conditioned and unconditioned rows out of order.
std::vector<Sequence> three_sequences(DiffusionGemma& m) {
  const int V = int(m.vocab_size());
  std::vector<Sequence> seqs(3);
  const int lengths[3] = {5, 23, 40};
  for (int i = 0; i < 3; ++i) {
    seqs[size_t(i)].cache = encoded(m, prompt_of(lengths[i], V, i));
    seqs[size_t(i)].canvas = canvas_of(m, i);
  }
  seqs[0].self_conditioning = single(m, seqs[1]);
  std::vector<float> peaked = single(m, seqs[2]);
  for (int64_t r = 0; r < m.canvas_length(); r += 2)
    for (int64_t v = 0; v < V; ++v) peaked[size_t(r * V + v)] = v == (r * 5 + 1) % V ? 40.0f : -40.0f;
  seqs[2].self_conditioning = std::move(peaked);
  return seqs;
}

void expect_batch_equals_single_passes(DiffusionGemma& m, const std::string& what) {
  std::vector<Sequence> seqs = three_sequences(m);
  std::vector<std::vector<float>> want;
  for (auto& s : seqs) want.push_back(single(m, s));
  const std::vector<std::vector<float>> got = batched(m, seqs);
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(got[i], want[i]) << what << ": sequence " << i;
  // Every subset and order too: all conditioned, none conditioned, one alone.
  std::vector<Sequence> pair;
  pair.push_back(std::move(seqs[2]));
  pair.push_back(std::move(seqs[0]));
  const auto got_pair = batched(m, pair);
  EXPECT_EQ(got_pair[0], want[2]) << what << ": conditioned pair";
  EXPECT_EQ(got_pair[1], want[0]) << what << ": conditioned pair";
  std::vector<Sequence> alone;
  alone.push_back(std::move(seqs[1]));
  EXPECT_EQ(batched(m, alone)[0], want[1]) << what << ": one unconditioned sequence";
}

TEST(BatchedDecode, EqualsSinglePassesBitForBit) {
  for (const WeightPrecision precision : {WeightPrecision::kAsStored, WeightPrecision::kBF16})
    for (const int threads : {1, 2}) {
      ModelOptions o;
      o.precision = precision;
      o.load_threads = threads;
      auto m = test::load_on_cpu(kGolden, o);
      auto* cpu = dynamic_cast<CpuBackend*>(&m->executor().backend());
      ASSERT_NE(cpu, nullptr);
      cpu->reset_soft_embedding_stats();
      expect_batch_equals_single_passes(*m, std::string(precision == WeightPrecision::kBF16 ? "bf16" : "fp32") + ", " +
                                                std::to_string(threads) + " threads");
      // Both soft-embedding paths ran (sparse rows, dense rows).
      EXPECT_GT(cpu->soft_embedding_stats().rows_sparse, 0);
      EXPECT_GT(cpu->soft_embedding_stats().rows_dense, 0);
    }
}

TEST(BatchedDecode, EqualsSinglePassesAtEveryDispatchLevel) {
  for (const CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16, CpuIsa::kAmx}) {
    CpuBackendOptions co;
    co.threads = 2;
    co.isa = isa;
    CpuBackend cpu(co);
    if (cpu.isa() != isa) continue;  // this CPU has no such level
    auto m = test::load_on_cpu(kGolden);
    m->set_backend(cpu);
    expect_batch_equals_single_passes(*m, "isa " + std::string(isa_name(isa)));
  }
}

TEST(BatchedDecode, DecoderWindowVariantsArePerSequence) {
  for (const DecoderWindow w : {DecoderWindow::kReference, DecoderWindow::kStatic, DecoderWindow::kPerQuery}) {
    ModelOptions o;
    o.decoder_window = w;
    auto m = test::load_on_cpu(kGolden, o);
    expect_batch_equals_single_passes(*m, "decoder window " + std::to_string(int(w)));
  }
}

TEST(BatchedDecode, ReadsTheCachesOnlyAndDefaultsToTheModelsOwn) {
  auto m = test::load_on_cpu(kGolden);
  std::vector<Sequence> seqs = three_sequences(*m);
  const std::vector<Sequence> before = seqs;
  m->encode(prompt_of(19, int(m->vocab_size()), 7));  // the model's own cache
  Sequence own;
  own.canvas = canvas_of(*m, 9);
  std::vector<float> want_own(static_cast<size_t>(m->canvas_length() * m->vocab_size()));
  m->decode(own.canvas.data(), nullptr, want_own.data());

  std::vector<std::vector<float>> out(2, std::vector<float>(want_own.size()));
  std::vector<DecodeItem> items(2);
  items[0].cache = &seqs[1].cache;
  items[0].canvas = seqs[1].canvas.data();
  items[0].logits = out[0].data();
  items[1].canvas = own.canvas.data();  // cache nullptr: the model's
  items[1].logits = out[1].data();
  const int step = m->decoder_step();
  m->decode_batch(items);
  EXPECT_EQ(m->decoder_step(), step + 1);
  EXPECT_EQ(out[1], want_own);
  EXPECT_EQ(out[0], single(*m, seqs[1]));
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(seqs[i].cache.length, before[i].cache.length);
    for (size_t l = 0; l < seqs[i].cache.layers.size(); ++l) {
      EXPECT_EQ(seqs[i].cache.layers[l].keys.f, before[i].cache.layers[l].keys.f);
      EXPECT_EQ(seqs[i].cache.layers[l].values.f, before[i].cache.layers[l].values.f);
      EXPECT_EQ(seqs[i].cache.layers[l].positions.i, before[i].cache.layers[l].positions.i);
    }
  }
  EXPECT_EQ(m->cache_length(), 19);
}

TEST(BatchedDecode, ShorterCanvasesAndBadItemsAreChecked) {
  auto m = test::load_on_cpu(kGolden);
  const int64_t V = m->vocab_size();
  std::vector<Sequence> seqs = three_sequences(*m);
  // Canvases of other lengths (n), as decode_n takes them.
  std::vector<float> want(static_cast<size_t>(5 * V)), got(want.size()), got_full(static_cast<size_t>(16 * V));
  m->swap_cache(seqs[2].cache);
  m->decode_n(seqs[2].canvas.data(), 5, nullptr, want.data());
  m->swap_cache(seqs[2].cache);
  std::vector<DecodeItem> items(2);
  items[0].cache = &seqs[2].cache;
  items[0].canvas = seqs[2].canvas.data();
  items[0].n = 5;
  items[0].logits = got.data();
  items[1].cache = &seqs[0].cache;
  items[1].canvas = seqs[0].canvas.data();
  items[1].self_conditioning = seqs[0].self_conditioning.data();
  items[1].logits = got_full.data();
  m->decode_batch(items);
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_full, single(*m, seqs[0]));

  std::vector<int32_t> bad = seqs[0].canvas;
  bad[3] = int32_t(V);
  items[1].canvas = bad.data();
  try {
    m->decode_batch(items);
    ADD_FAILURE() << "an out-of-range id was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("item 1: canvas token id 512 at canvas position 3"), std::string::npos)
        << e.what();
  }
  items[1].canvas = seqs[0].canvas.data();
  KvCache other = m->empty_cache();
  other.layers[2].head_dim += 1;
  items[1].cache = &other;
  EXPECT_THROW(m->decode_batch(items), Error);
  items[1].cache = &seqs[0].cache;
  items[1].logits = nullptr;
  EXPECT_THROW(m->decode_batch(items), Error);
  m->decode_batch({});  // nothing to do
}

// The sampler pass in the batch (the server's sequences on decode_sample):
// each sampling item gets exactly the argmax, entropy, draw and z that
// decode_sample() gives its sequence alone, over two steps (the second
// conditioned on each item's own z), with a logits item in the same batch
// and different temperatures; a batch that fails leaves every z as it was.
TEST(BatchedDecode, SamplingItemsEqualDecodeSampleAlone) {
  for (const int threads : {1, 2}) {
    ModelOptions o;
    o.load_threads = threads;
    auto m = test::load_on_cpu(kGolden, o);
    const int64_t L = m->canvas_length(), V = m->vocab_size();
    std::vector<Sequence> seqs = three_sequences(*m);
    const float temps[3] = {0.7f, 1.0f, 1.3f};
    std::vector<double> uniforms(static_cast<size_t>(L));
    for (size_t r = 0; r < uniforms.size(); ++r) uniforms[r] = double(r * 37 % 101) / 101.0;
    // Alone: each sequence's cache swapped in, two decode_sample() steps.
    std::vector<std::vector<RowSamples>> want(3, std::vector<RowSamples>(2));
    std::vector<std::vector<float>> want_z(3, std::vector<float>(size_t(L * V)));
    for (size_t i = 0; i < 3; ++i) {
      m->swap_cache(seqs[i].cache);
      for (int step = 0; step < 2; ++step)
        m->decode_sample(seqs[i].canvas.data(), step > 0, temps[i], i == 1 ? nullptr : uniforms.data(),
                         want[i][size_t(step)]);
      m->processed_logits(want_z[i].data());
      m->swap_cache(seqs[i].cache);
    }
    // Batched: sequences 0 and 2 sample, sequence 1 asks for its logits.
    const std::vector<float> want_logits = single(*m, seqs[1]);
    std::vector<Tensor> z(3);
    std::vector<RowSamples> got(3);
    std::vector<float> logits(size_t(L * V));
    for (int step = 0; step < 2; ++step) {
      std::vector<DecodeItem> items(3);
      for (size_t i = 0; i < 3; ++i) {
        items[i].cache = &seqs[i].cache;
        items[i].canvas = seqs[i].canvas.data();
      }
      for (size_t i : {0, 2}) {
        items[i].samples = &got[i];
        items[i].z = &z[i];
        items[i].z_self_conditioning = step > 0;
        items[i].temperature = temps[i];
        items[i].uniforms = uniforms.data();
      }
      items[1].logits = logits.data();
      m->decode_batch(items);
      for (size_t i : {0, 2}) {
        const std::string what =
            std::to_string(threads) + " threads, sequence " + std::to_string(i) + " step " + std::to_string(step);
        EXPECT_EQ(got[i].argmax, want[i][size_t(step)].argmax) << what;
        EXPECT_EQ(got[i].entropy, want[i][size_t(step)].entropy) << what;
        EXPECT_EQ(got[i].sample, want[i][size_t(step)].sample) << what;
      }
      EXPECT_EQ(logits, want_logits);
    }
    EXPECT_EQ(z[0].f, want_z[0]);
    EXPECT_EQ(z[2].f, want_z[2]);
    // One sampling item alone (its rows are the whole pass: no slice), no draw.
    RowSamples one;
    std::vector<DecodeItem> items(1);
    items[0].cache = &seqs[1].cache;
    items[0].canvas = seqs[1].canvas.data();
    items[0].samples = &one;
    items[0].z = &z[1];
    items[0].temperature = temps[1];
    m->decode_batch(items);
    EXPECT_EQ(one.argmax, want[1][0].argmax);
    EXPECT_EQ(one.entropy, want[1][0].entropy);
    EXPECT_EQ(one.sample, std::vector<int32_t>(size_t(L), -1));
    // A batch whose sampler pass fails (NaN logits: the sample op throws
    // after the decoder pass ran) leaves every z as the previous pass left it.
    std::vector<DecodeItem> failing(2);
    failing[0].cache = &seqs[0].cache;
    failing[0].canvas = seqs[0].canvas.data();
    failing[0].samples = &got[0];
    failing[0].z = &z[0];
    failing[0].z_self_conditioning = true;
    failing[1].cache = &seqs[2].cache;
    failing[1].canvas = seqs[2].canvas.data();
    failing[1].samples = &got[2];
    failing[1].z = &z[2];
    failing[1].z_self_conditioning = true;
    {
      InjectSpec nan;
      nan.op = OpKind::kSoftcap;
      nan.pass = Pass::kDecoder;
      nan.step = m->decoder_step();
      nan.kind = FaultKind::kNan;
      InjectBackend inject(std::make_unique<CpuBackend>(threads), nan);
      Backend& own = m->executor().backend();
      m->set_backend(inject);
      EXPECT_THROW(m->decode_batch(failing), BadLogitsRow);
      m->set_backend(own);
      EXPECT_TRUE(inject.fired());
    }
    EXPECT_EQ(z[0].f, want_z[0]);
    EXPECT_EQ(z[2].f, want_z[2]);
    // Items refused up front: a z of the wrong shape, a missing z, an
    // out-of-range id.
    Tensor wrong = Tensor::f32({2, V});
    failing[1].z = &wrong;
    try {
      m->decode_batch(failing);
      ADD_FAILURE() << "a z of the wrong shape was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("item 1: z_self_conditioning needs z of [16, 512]"), std::string::npos)
          << e.what();
    }
    failing[1].z = nullptr;
    EXPECT_THROW(m->decode_batch(failing), Error);
    std::vector<int32_t> bad = seqs[2].canvas;
    bad[1] = int32_t(V);
    failing[1].z = &z[2];
    failing[1].canvas = bad.data();
    EXPECT_THROW(m->decode_batch(failing), Error);
    EXPECT_EQ(z[0].f, want_z[0]);
    EXPECT_EQ(z[2].f, want_z[2]);
    // The batch still runs after all that.
    failing[1].canvas = seqs[2].canvas.data();
    m->decode_batch(failing);
    EXPECT_EQ(z[0].shape, (std::vector<int64_t>{L, V}));
  }
}

}  // namespace
}  // namespace dgemma
