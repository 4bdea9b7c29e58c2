#include "model/parity.h"

#include "dgemma/error.h"
#include "io/tensor_io.h"
#include "model/tap_recorder.h"

namespace dgemma {
namespace {

std::vector<int32_t> ids_of(const TensorStore& in, const std::string& name, const std::string& file) {
  const TensorView* v = in.find(name);
  if (!v) throw Error(file + ": tensor \"" + name + "\" is missing");
  Tensor t = tensor_from_view(*v);
  if (t.dtype != DType::kI32 || t.shape.size() != 2 || t.shape[0] != 1)
    throw Error(file + ": tensor \"" + name + "\" must be integer ids of shape [1, n], got " + t.shape_string());
  return t.i;
}

// Positions must continue the cache contiguously (the engine computes them).
void check_positions(const TensorStore& in, const std::string& name, const std::string& file, int64_t start, size_t n) {
  const TensorView* v = in.find(name);
  if (!v) return;
  Tensor p = tensor_from_view(*v);
  if (size_t(p.numel()) != n)
    throw Error(file + ": \"" + name + "\" has " + std::to_string(p.numel()) + " entries, expected " +
                std::to_string(n));
  for (size_t k = 0; k < n; ++k)
    if (p.i[k] != start + int64_t(k))
      throw Error(file + ": \"" + name + "\"[" + std::to_string(k) + "] = " + std::to_string(p.i[k]) + ", expected " +
                  std::to_string(start + int64_t(k)) + " (positions must continue the cache contiguously)");
}

// [n, ...] activations get the batch dimension of the golden files.
Tensor with_batch(const Tensor& t) {
  Tensor o = t;
  std::vector<int64_t> s = {1};
  s.insert(s.end(), t.shape.begin(), t.shape.end());
  o.shape = s;
  return o;
}

void take_taps(const TapRecorder& rec, NamedTensors& out) {
  for (const auto& [name, t] : rec.taps()) {
    if (name.find(".router.") != std::string::npos)
      out[name] = t;  // [T, k], as the golden files
    else
      out[name] = with_batch(t);
  }
}

// Cache in the golden layout [1, kv_heads, S, head_dim].
void take_cache(const KvCache& cache, NamedTensors& out) {
  for (size_t li = 0; li < cache.layers.size(); ++li) {
    const LayerCache& lc = cache.layers[li];
    const int64_t S = lc.size(), Hk = lc.kv_heads, d = lc.head_dim;
    lc.keys.ensure_host();
    lc.values.ensure_host();
    Tensor k = Tensor::f32({1, Hk, S, d}), v = Tensor::f32({1, Hk, S, d});
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < Hk; ++h)
        for (int64_t j = 0; j < d; ++j) {
          k.f[size_t((h * S + s) * d + j)] = lc.keys.f[size_t((s * Hk + h) * d + j)];
          v.f[size_t((h * S + s) * d + j)] = lc.values.f[size_t((s * Hk + h) * d + j)];
        }
    out["cache." + std::to_string(li) + ".keys"] = std::move(k);
    out["cache." + std::to_string(li) + ".values"] = std::move(v);
  }
}

}  // namespace

NamedTensors run_parity_inputs(DiffusionGemma& model, const std::vector<std::string>& files, bool expert_inputs) {
  NamedTensors out;
  TapRecorder rec(expert_inputs);
  model.set_observer(&rec);
  struct Reset {
    DiffusionGemma& m;
    ~Reset() { m.set_observer(nullptr); }
  } reset{model};
  bool any = false;
  for (const auto& file : files) {
    TensorStore in = TensorStore::open_file(file);
    if (in.find("input_ids")) {
      any = true;
      std::vector<int32_t> ids = ids_of(in, "input_ids", file);
      model.truncate_cache(0);  // fresh cache
      check_positions(in, "position_ids", file, 0, ids.size());
      rec.clear();
      model.encode(ids);
      take_taps(rec, out);
      take_cache(model.cache(), out);
    }
    if (in.find("decoder_input_ids")) {
      any = true;
      std::vector<int32_t> canvas = ids_of(in, "decoder_input_ids", file);
      check_positions(in, "decoder_position_ids", file, model.cache_length(), canvas.size());
      const int64_t n = int64_t(canvas.size()), V = model.vocab_size();
      std::vector<float> sc;
      if (const TensorView* s = in.find("self_conditioning_logits")) {
        Tensor t = tensor_from_view(*s);
        if (t.dtype != DType::kF32 || t.numel() != n * V)
          throw Error(file + ": \"self_conditioning_logits\" must be float [1, " + std::to_string(n) + ", " +
                      std::to_string(V) + "], got " + t.shape_string());
        sc = std::move(t.f);
      }
      std::vector<float> logits(size_t(n * V));
      rec.clear();
      model.decode_n(canvas.data(), n, sc.empty() ? nullptr : sc.data(), logits.data());
      take_taps(rec, out);
    }
  }
  if (!any) throw Error("no input file holds input_ids or decoder_input_ids");
  return out;
}

void write_named_tensors(const std::string& path, const NamedTensors& tensors) {
  SafetensorsWriter w;
  for (const auto& [name, t] : tensors) {
    if (t.dtype == DType::kF32) {
      w.add_f32(name, t.shape, t.f.data());
    } else {
      std::vector<int64_t> wide(t.i.begin(), t.i.end());
      w.add(name, DType::kI64, t.shape, wide.data());
    }
  }
  w.set_metadata("format", "pt");
  w.set_metadata("producer", "dgemma forward");
  w.write(path);
}

}  // namespace dgemma
