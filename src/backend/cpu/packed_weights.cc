#include "backend/cpu/packed_weights.h"

#include <algorithm>
#include <cstring>

#include "dgemma/error.h"

namespace dgemma::cpu {

bool packable_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

PanelType panel_type_for(DType t, const IsaKernels& isa, bool bf16_pairs) {
  if (t == DType::kBF16) return bf16_pairs ? PanelType::kBF16Pairs : isa.bf16_panels;
  return PanelType::kF32;  // F32, and F16 widened exactly to fp32
}

GemmB PackedWeight::b(int64_t group) const {
  GemmB g;
  g.type = type;
  const size_t esize = type == PanelType::kF32 ? 4 : 2;
  g.panels = static_cast<const uint8_t*>(data) + size_t(group * group_stride) * esize;
  g.panel_stride = panel_stride;
  return g;
}

static int64_t panel_elems(PanelType type, int64_t k) {
  return type == PanelType::kBF16Pairs ? (k + 1) / 2 * 2 * kNr : k * kNr;
}

void pack_weight_panels(const WeightRef& w, int64_t group, int64_t n, int64_t k, PanelType type, int64_t p0, int64_t p1,
                        void* out) {
  const int64_t stride = panel_elems(type, k);
  // K in blocks so that the 32 source rows being transposed stay in L1.
  constexpr int64_t kBlock = 128;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t cols = std::min<int64_t>(kNr, n - p * kNr);
    const int64_t row0 = group * n + p * kNr;
    if (type == PanelType::kF32) {
      float* o = static_cast<float*>(out) + p * stride;
      std::memset(o, 0, size_t(stride) * 4);
      if (w.dtype == DType::kF32) {
        const float* src = static_cast<const float*>(w.data) + row0 * k;
        for (int64_t kb = 0; kb < k; kb += kBlock)
          for (int64_t j = 0; j < cols; ++j)
            for (int64_t kk = kb; kk < std::min(k, kb + kBlock); ++kk) o[kk * kNr + j] = src[j * k + kk];
      } else {
        for (int64_t j = 0; j < cols; ++j)
          for (int64_t kk = 0; kk < k; ++kk) o[kk * kNr + j] = w.at(size_t((row0 + j) * k + kk));
      }
    } else {
      if (w.dtype != DType::kBF16)
        throw Error("internal: bf16 panels from a " + std::string(dtype_name(w.dtype)) + " weight");
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + row0 * k;
      uint16_t* o = static_cast<uint16_t*>(out) + p * stride;
      std::memset(o, 0, size_t(stride) * 2);
      for (int64_t kb = 0; kb < k; kb += kBlock)
        for (int64_t j = 0; j < cols; ++j)
          for (int64_t kk = kb; kk < std::min(k, kb + kBlock); ++kk) {
            if (type == PanelType::kBF16)
              o[kk * kNr + j] = src[j * k + kk];
            else if (type == PanelType::kBF16Split)
              o[kk * kNr + bf16_split_slot(int(j))] = src[j * k + kk];
            else
              o[(kk / 2) * 2 * kNr + 2 * j + (kk & 1)] = src[j * k + kk];
          }
    }
  }
}

// FNV-1a over the whole buffer (≤ 64 KB) or 512 evenly spaced 8-byte words.
static uint64_t fingerprint(const void* data, size_t bytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const uint8_t* q, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ q[i]) * 1099511628211ull;
  };
  if (bytes <= 65536) {
    mix(p, bytes);
  } else {
    constexpr size_t kSamples = 512;
    for (size_t i = 0; i < kSamples; ++i) mix(p + (bytes - 8) / (kSamples - 1) * i, 8);
    mix(p + bytes - 8, 8);
  }
  return h ^ bytes;
}

const PackedWeight& PackedWeightCache::get(const WeightRef& w, int64_t groups, int64_t n, int64_t k, PanelType type,
                                           ThreadPool& pool) {
  const Key key{w.data, int(type), groups, n, k};
  const size_t src_bytes = size_t(groups * n * k) * size_t(dtype_bits(w.dtype) / 8);
  const uint64_t fp = fingerprint(w.data, src_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    if (it->second->fingerprint == fp) return *it->second;
    map_.erase(it);  // the address now holds another weight
  }
  auto pw = std::make_unique<PackedWeight>();
  pw->type = type;
  pw->groups = groups;
  pw->n = n;
  pw->k = k;
  pw->fingerprint = fp;
  pw->panels = (n + kNr - 1) / kNr;
  pw->panel_stride = panel_elems(type, k);
  pw->group_stride = pw->panels * pw->panel_stride;
  const size_t esize = type == PanelType::kF32 ? 4 : 2;
  pw->bytes = size_t(groups * pw->group_stride) * esize;
  pw->storage.reset(new uint8_t[pw->bytes + 64]);
  pw->data = pw->storage.get() + (64 - reinterpret_cast<uintptr_t>(pw->storage.get()) % 64) % 64;
  uint8_t* base = static_cast<uint8_t*>(pw->data);
  const int64_t gs = pw->group_stride;
  const int64_t panels = pw->panels;
  pool.parallel_for(groups * panels, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t g = i / panels, p = i % panels;
      pack_weight_panels(w, g, n, k, type, p, p + 1, base + size_t(g * gs) * esize);
    }
  });
  auto& ref = *pw;
  map_.emplace(key, std::move(pw));
  return ref;
}

void PackedWeightCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
}

size_t PackedWeightCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t b = 0;
  for (const auto& [k, v] : map_) b += v->bytes;
  return b;
}

size_t PackedWeightCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace dgemma::cpu
