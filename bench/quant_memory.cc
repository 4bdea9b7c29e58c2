// Memory of quantized checkpoints at real layer shapes (what a quantized load must keep resident: docs/formats.md §8).
//
//   bench_quant_memory random CONFIG.json OUT_DIR
//       writes a random BF16 checkpoint for CONFIG (streamed, any size):
//       matrices ~ N(0, 0.02²) (Irwin-Hall approximation), vectors U(0.5, 1.5)
//   bench_quant_memory load DIR [--touch] [--decode]
//       loads DIR as the engine does (config, safetensors, bind_weights with
//       the quantized readers) and prints the peak RSS against the weight
//       file size; --touch then reads every page of every bound weight (what
//       a forward pass over all weights does to the mapping);
//       --decode runs one encoder pass (16 tokens) and one decoder pass over
//       a full canvas.
//
// Run it under /usr/bin/time -v for the kernel's own peak RSS figure.
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dgemma/error.h"
#include "io/safetensors.h"
#include "checkpoint/config.h"
#include "model/diffusion_gemma.h"
#include "checkpoint/tensor_names.h"
#include "quantize/quantized_weight.h"
#include "quantize/stream_writer.h"
#include "cpu_model.h"

namespace dgemma {
namespace {

double peak_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

double current_rss_mib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return double(resident) * 4096.0 / double(1 << 20);
}

// xorshift64* with an Irwin-Hall normal: about twice as fast per value as the
// tests' Rng (support/test_rng.h: mt19937 and std::normal_distribution),
// which counts when writing checkpoints of many GiB.
struct CheapRng {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }
  float normal() { return (uniform() + uniform() + uniform() + uniform() - 2.0f) * 1.7320508f; }
};

int write_random(const std::string& config_path, const std::string& out_dir) {
  const ModelConfig config = load_model_config(config_path);
  std::filesystem::create_directories(out_dir);
  std::filesystem::copy_file(config_path, out_dir + "/config.json", std::filesystem::copy_options::overwrite_existing);
  SafetensorsStreamWriter w;
  const std::vector<ExpectedTensor> tensors = expected_tensors(config);
  for (const ExpectedTensor& t : tensors) w.declare(t.name, DType::kBF16, t.shape);
  w.set_metadata("format", "pt");
  w.begin(out_dir + "/model.safetensors");
  CheapRng rng{0x9E3779B97F4A7C15ull};
  std::vector<uint16_t> buf(1 << 20);
  for (const ExpectedTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    for (int64_t i = 0; i < n; i += int64_t(buf.size())) {
      const int64_t c = std::min<int64_t>(int64_t(buf.size()), n - i);
      for (int64_t k = 0; k < c; ++k)
        buf[size_t(k)] = f32_to_bf16(t.shape.size() == 1 ? 0.5f + rng.uniform() : 0.02f * rng.normal());
      w.write(t.name, buf.data(), uint64_t(c) * 2, uint64_t(i) * 2);
    }
    std::fprintf(stderr, "\r%-70s", t.name.c_str());
  }
  w.finish();
  std::fprintf(stderr, "\nwrote %s/model.safetensors (%.2f GiB)\n", out_dir.c_str(),
               double(w.total_bytes()) / double(1 << 30));
  return 0;
}

int load(const std::string& dir, bool touch, bool decode) {
  uint64_t file_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") file_bytes += e.file_size();
  const double base = peak_rss_mib();
  ModelOptions o;
  o.verify_tied_copies = false;
  auto model = test::load_on_cpu(dir, o);
  std::printf("weights file   %.1f MiB\n", double(file_bytes) / double(1 << 20));
  std::printf("before load    peak RSS %.1f MiB\n", base);
  std::printf("after load     peak RSS %.1f MiB (current %.1f MiB)\n", peak_rss_mib(), current_rss_mib());
  if (touch) {
    uint64_t sum = 0, bytes = 0;
    auto touch_range = [&](const void* p, uint64_t n) {
      const uint8_t* b = static_cast<const uint8_t*>(p);
      for (uint64_t i = 0; i < n; i += 4096) sum += b[i];
      bytes += n;
    };
    const ModelWeights& w = model->weights();
    std::vector<const WeightRef*> refs = {&w.embed, &w.final_norm, &w.sc_pre_norm, &w.sc_gate, &w.sc_up, &w.sc_down};
    for (const LayerWeights& L : w.layers)
      for (const WeightRef* r : {&L.input_layernorm,
                                 &L.q_proj,
                                 &L.k_proj,
                                 &L.v_proj,
                                 &L.o_proj,
                                 &L.q_norm,
                                 &L.k_norm,
                                 &L.post_attention_layernorm,
                                 &L.pre_feedforward_layernorm,
                                 &L.mlp_gate,
                                 &L.mlp_up,
                                 &L.mlp_down,
                                 &L.post_feedforward_layernorm_1,
                                 &L.router_proj,
                                 &L.router_scale,
                                 &L.router_per_expert_scale,
                                 &L.pre_feedforward_layernorm_2,
                                 &L.experts_gate_up,
                                 &L.experts_down,
                                 &L.post_feedforward_layernorm_2,
                                 &L.post_feedforward_layernorm,
                                 &L.decoder_layer_scalar,
                                 &L.encoder_layer_scalar})
        refs.push_back(r);
    for (const WeightRef* r : refs) {
      if (r->empty()) continue;
      if (!r->quant) {
        touch_range(r->data, uint64_t(r->numel()) * uint64_t(dtype_bits(r->dtype) / 8));
        continue;
      }
      const QuantizedWeight& q = *r->quant;
      const bool flat = q.scheme == QuantScheme::kNF4;
      for (const QuantSlice& s : q.slices) {
        const uint64_t n = flat ? uint64_t(q.rows * q.cols) : uint64_t(s.rows * q.cols);
        touch_range(s.codes, flat ? (n + 1) / 2 : n * uint64_t(q.bits) / 8);
        const uint64_t blocks = (n + uint64_t(q.block) - 1) / uint64_t(q.block);
        touch_range(s.scales, blocks * uint64_t(dtype_bits(q.scale_dtype) / 8));
        if (s.biases) touch_range(s.biases, blocks * uint64_t(dtype_bits(q.scale_dtype) / 8));
      }
    }
    std::printf("after touch    peak RSS %.1f MiB (read every page of %.1f MiB of bound weights; checksum %llu)\n",
                peak_rss_mib(), double(bytes) / double(1 << 20), static_cast<unsigned long long>(sum % 1000));
  }
  if (decode) {
    std::vector<int32_t> prompt(16);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(2 + i * 7);
    model->encode(prompt);
    std::vector<int32_t> canvas(size_t(model->canvas_length()), 3);
    std::vector<float> logits(size_t(model->canvas_length() * model->vocab_size()));
    model->decode(canvas.data(), nullptr, logits.data());
    std::printf("after decode   peak RSS %.1f MiB (logits buffer %.1f MiB)\n", peak_rss_mib(),
                double(logits.size()) * 4.0 / double(1 << 20));
  }
  return 0;
}

}  // namespace
}  // namespace dgemma

int main(int argc, char** argv) {
  try {
    std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 3 && a[0] == "random") return dgemma::write_random(a[1], a[2]);
    if (a.size() >= 2 && a[0] == "load") {
      bool touch = false, decode = false;
      for (size_t i = 2; i < a.size(); ++i) {
        if (a[i] == "--touch")
          touch = true;
        else if (a[i] == "--decode")
          decode = true;
        else
          throw dgemma::Error("unknown option " + a[i]);
      }
      return dgemma::load(a[1], touch, decode);
    }
    std::fprintf(stderr, "usage: %s random CONFIG.json OUT_DIR | load DIR [--touch] [--decode]\n", argv[0]);
    return 2;
  } catch (const dgemma::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
