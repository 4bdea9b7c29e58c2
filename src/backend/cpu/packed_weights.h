#pragma once
// Weights repacked once into GEMM panels (isa_kernels.h), cached by the CPU
// backend for the lifetime of the backend. The key is the weight's data
// pointer plus layout and shape, checked against a fingerprint of the
// contents (all bytes of small weights, 512 sampled 8-byte words of large
// ones), so a freed weight whose address is reused by another one (common in
// tests) is repacked rather than served stale. Weights must still not be
// modified in place while a backend uses them (clear() forgets all panels).
// Packing happens on first use under a mutex, in parallel over panels.
//
// Memory: a packed bf16 weight takes as much as the weight itself; the
// original (usually a read-only mapping of the checkpoint) is not touched by
// the packed kernels afterwards, so its pages can be dropped by the OS.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/thread_pool.h"
#include "backend/cpu/isa_kernels.h"
#include "core/tensor.h"

namespace dgemma::cpu {

struct PackedWeight {
  PanelType type = PanelType::kF32;
  int64_t groups = 1, n = 0, k = 0;
  int64_t panels = 0;        // per group: ceil(n / kNr)
  int64_t panel_stride = 0;  // elements per panel
  int64_t group_stride = 0;  // elements per group
  size_t bytes = 0;
  uint64_t fingerprint = 0;
  std::unique_ptr<uint8_t[]> storage;  // 64-byte aligned start at data
  void* data = nullptr;

  GemmB b(int64_t group = 0) const;
};

// Whether the fast kernels can read this weight dtype (F32, BF16, F16).
bool packable_dtype(DType t);
// Whether the fast (packed) kernels can read this weight: a plain F32/BF16/F16
// tensor. Quantized weights (WeightRef::quant) go to the reference kernels,
// which hand them to the quantized kernels (quant_kernels.h).
inline bool fast_readable(const WeightRef& w) { return !w.quant && packable_dtype(w.dtype); }
// Panel type used for weights of dtype `t` by the kernels of `isa`.
PanelType panel_type_for(DType t, const IsaKernels& isa, bool bf16_pairs);

// Packs panels [p0, p1) of rows [group·n, group·n + n) of a [groups·n, k]
// weight into `out` (the start of that group's panels).
void pack_weight_panels(const WeightRef& w, int64_t group, int64_t n, int64_t k, PanelType type, int64_t p0, int64_t p1,
                        void* out);

class PackedWeightCache {
 public:
  // w viewed as [groups, n, k] (groups = 1 for a matrix).
  const PackedWeight& get(const WeightRef& w, int64_t groups, int64_t n, int64_t k, PanelType type, ThreadPool& pool);
  void clear();
  size_t bytes() const;
  size_t size() const;

 private:
  using Key = std::tuple<const void*, int, int64_t, int64_t, int64_t>;
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<PackedWeight>> map_;
};

}  // namespace dgemma::cpu
