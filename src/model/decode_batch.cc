// One decoder pass over the canvases of several sequences, each against its
// own KV cache (DiffusionGemma::decode_batch).
#include "model/diffusion_gemma.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "dgemma/error.h"
#include "model/op_site.h"
#include "ops/row_sampling.h"

namespace dgemma {

// Batched decoder pass (docs/model.md §2.3 per item; one pass for many canvases is what makes a batch cheaper than its
// items: docs/cuda.md §7.2). Rows are ordered with the self-conditioned items first (those conditioned from the host,
// then those conditioned on their own z), so that the soft embedding and the self-conditioning MLP run once over one
// contiguous block of rows.
void DiffusionGemma::decode_batch(std::span<const DecodeItem> items) {
  processed_valid_ = false;  // not a decode_sample() of the model's cache
  if (items.empty()) return;
  const int64_t V = config_.vocab_size;
  // 0: conditioned from the host, 1: on its own z, 2: unconditioned.
  auto group = [&](size_t i) {
    return items[i].self_conditioning ? 0 : items[i].samples && items[i].z_self_conditioning ? 1 : 2;
  };
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return group(a) < group(b); });
  int64_t R = 0, R_sc = 0, R_host_sc = 0;
  bool sampling = false;
  std::vector<int64_t> row0(items.size()), rows(items.size());
  for (const size_t i : order) {
    const DecodeItem& it = items[i];
    const std::string who = "decode_batch: item " + std::to_string(i);
    if (!it.canvas || !(it.logits || it.samples))
      throw Error(who + ": the canvas pointer and the logits or samples pointer must be set");
    if (it.n < 0) throw Error(who + ": negative canvas length " + std::to_string(it.n));
    if (it.cache) check_cache_layout(*it.cache, who);
    rows[i] = it.n > 0 ? it.n : config_.canvas_length;
    row0[i] = R;
    R += rows[i];
    if (it.samples) {
      sampling = true;
      if (!it.z) throw Error(who + ": a sampling item needs its z tensor");
      if (it.self_conditioning)
        throw Error(who + ": a sampling item is conditioned on its z (z_self_conditioning), not on host logits");
      if (it.z_self_conditioning && (it.z->dtype != DType::kF32 || it.z->shape != std::vector<int64_t>{rows[i], V}))
        throw Error(who + ": z_self_conditioning needs z of [" + std::to_string(rows[i]) + ", " + std::to_string(V) +
                    "] F32 (the previous pass's), got " + it.z->shape_string());
      if (it.z_self_conditioning) R_sc += rows[i];
    } else if (it.self_conditioning) {
      R_sc += rows[i];
      R_host_sc += rows[i];
    }
  }
  Tensor ids = Tensor::i32({R}), pos = Tensor::i32({R});
  std::vector<Tensor> item_pos;  // per sequence, for its attention
  item_pos.reserve(items.size());
  std::vector<BatchSegment> segments;
  segments.reserve(items.size());
  for (const size_t i : order) {
    const DecodeItem& it = items[i];
    const KvCache* cache = it.cache ? it.cache : &cache_;
    for (int64_t k = 0; k < rows[i]; ++k) {
      if (it.canvas[k] < 0 || it.canvas[k] >= V)
        throw Error("decode_batch: item " + std::to_string(i) + ": canvas token id " + std::to_string(it.canvas[k]) +
                    " at canvas position " + std::to_string(k) + " is out of range [0, " + std::to_string(V) + ")");
      ids.i[size_t(row0[i] + k)] = it.canvas[k];
      pos.i[size_t(row0[i] + k)] = int32_t(cache->length + k);
    }
    item_pos.push_back(positions_tensor(cache->length, rows[i]));
    segments.push_back({cache, row0[i], rows[i], &item_pos.back()});
  }
  // The self-conditioning rows: the host items' logits in one tensor, then
  // each sampling item's z where it lies (on a device: stacked there).
  std::vector<const Tensor*> sc_parts;
  if (R_host_sc > 0) {
    Tensor& host = workspace_.slot("self_conditioning.input");
    host.dtype = DType::kF32;
    host.resize({R_host_sc, V});
    for (const size_t i : order)
      if (items[i].self_conditioning)
        std::memcpy(host.f.data() + row0[i] * V, items[i].self_conditioning, size_t(rows[i] * V) * 4);
    host.host_written();
    sc_parts.push_back(&host);
  }
  for (const size_t i : order)
    if (items[i].samples && items[i].z_self_conditioning) sc_parts.push_back(items[i].z);
  const Tensor* scl = sc_parts.empty() ? nullptr : sc_parts.front();
  if (sc_parts.size() > 1) {
    OpSite op{exec_, -1, Pass::kDecoder, decoder_step_, workspace_};
    scl = &op.run(OpKind::kConcatRows, "self_conditioning.stacked", sc_parts, {});
  }
  Tensor& x = decoder_input(ids, scl, R_sc);
  struct EndBatch {
    std::vector<BatchSegment>& batch;
    ~EndBatch() { batch.clear(); }
  } end_batch{batch_};
  batch_ = std::move(segments);
  run_layers(Pass::kDecoder, x, pos);
  const Tensor& logits = decoder_output(x);
  const int step = decoder_step_++;
  if (!sampling) {
    logits.ensure_host();
    for (const size_t i : order) std::memcpy(items[i].logits, logits.f.data() + row0[i] * V, size_t(rows[i] * V) * 4);
    return;
  }
  // Each item's rows of the stacked logits (a slice on the model's backend),
  // then its sampler pass into a fresh z or the copy of its logits to the host.
  OpSite op{exec_, -1, Pass::kDecoder, step, workspace_};
  const Tensor none = Tensor::f32({0, V});
  std::vector<Tensor*> fresh_z(items.size(), nullptr);
  std::vector<const Tensor*> item_logits(items.size(), &logits);
  std::vector<SampleSlots> slots(items.size());
  std::vector<const Tensor*> to_host;
  for (const size_t i : order) {
    const DecodeItem& it = items[i];
    if (rows[i] != R) {
      OpAttrs slice;
      slice.skip_rows = row0[i];
      slice.take_rows = rows[i];
      // A sampling item's slice is read at once by its sample op; a logits
      // item's is kept until the copy below, in a slot of its own.
      item_logits[i] = &op.run(OpKind::kConcatRows, it.samples ? "sample.logits" : "logits." + std::to_string(i),
                               {&logits, &none}, {}, slice);
    }
    if (it.samples) {
      const std::string name = "sample." + std::to_string(i);
      fresh_z[i] = &workspace_.slot(name + ".z");
      slots[i] = sample_rows(*item_logits[i], *fresh_z[i], it.temperature, it.uniforms, step, name);
      to_host.insert(to_host.end(), {slots[i].argmax, slots[i].entropy, slots[i].sample});
    } else {
      to_host.push_back(item_logits[i]);
    }
  }
  ensure_host(to_host);  // one wait for every item's samples and logits
  for (const size_t i : order)
    if (items[i].samples) sample_rows_out(slots[i], *fresh_z[i], step, *items[i].samples);
  // The whole pass succeeded: each sampling item's z becomes this pass's.
  for (const size_t i : order) {
    if (items[i].samples)
      std::swap(*items[i].z, *fresh_z[i]);
    else
      std::memcpy(items[i].logits, item_logits[i]->f.data(), size_t(rows[i] * V) * 4);
  }
}

}  // namespace dgemma
