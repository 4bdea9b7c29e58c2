#pragma once
// The weights on the device (docs/opencl.md §1): each plain weight (F32, BF16,
// F16, F8_E4M3) is uploaded once, in its stored dtype, and found again by its
// data pointer, dtype and shape, while the bytes at both ends of its data
// are the ones uploaded (so that another weight made at a freed one's
// address is not taken for it); each quantized weight is uploaded once in its
// packed form (cl_quant_upload.h) and found again by its QuantizedWeight (held
// weakly: a weight freed and another made at its address is not confused
// with it, and the freed one's buffers go at the next upload).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/opencl/cl_runtime.h"
#include "core/tensor.h"

namespace dgemma::opencl {

// A quantized weight on the device: the buffers and parameters of the
// decoders (QPARAMS, kernels_common.cl). No buffer is null: one the scheme does
// not use is `codes` again (never read).
struct ClQuantWeight {
  const char* scheme = "";  // nf4, nvfp4, affine, int8, fp8
  cl_mem codes = nullptr, scales = nullptr, extra = nullptr, table = nullptr;
  int cols = 0, block = 0, p0 = 0, p1 = 0;
  float f0 = 0.0f;
};

class WeightCache {
 public:
  explicit WeightCache(std::shared_ptr<ClRuntime> runtime) : runtime_(std::move(runtime)) {}
  ~WeightCache() { clear(); }
  WeightCache(const WeightCache&) = delete;
  WeightCache& operator=(const WeightCache&) = delete;

  // The device copy of plain `w` (uploaded on first use); `where` names the op.
  cl_mem get(const WeightRef& w, const std::string& where);
  // The device copy of quantized `w` (w.quant set), uploaded packed on first use.
  const ClQuantWeight& quant(const WeightRef& w, const std::string& where);
  void clear();
  // Bytes held on the device, plain and quantized weights together.
  int64_t bytes() const { return bytes_; }
  // Weights held (a quantized one counts once, whatever its buffers).
  size_t size() const { return buffers_.size() + quants_.size(); }

 private:
  cl_mem upload(const void* data, size_t bytes, const std::string& what, const std::string& where);

  using Key = std::tuple<const void*, DType, std::vector<int64_t>>;
  struct Quant {
    ClQuantWeight view;
    std::vector<cl_mem> buffers;  // released with the entry
    int64_t bytes = 0;
  };
  void release(Quant& q);

  std::shared_ptr<ClRuntime> runtime_;
  struct Plain {
    cl_mem mem = nullptr;
    uint64_t ends = 0;  // fingerprint of the first and last 64 bytes (ends_of)
    int64_t bytes = 0;
  };
  std::map<Key, Plain> buffers_;
  std::map<std::weak_ptr<const QuantizedWeight>, Quant, std::owner_less<>> quants_;
  int64_t bytes_ = 0;
};

}  // namespace dgemma::opencl
