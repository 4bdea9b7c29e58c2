#include "quantize/resolve.h"

#include <cstring>

#include "checkpoint/gguf_names.h"
#include "dgemma/error.h"
#include "quantize/readers.h"

namespace dgemma {
namespace quant {

std::string where(const TensorView& v) { return std::string(v.file) + ": tensor " + v.name(); }

const TensorView& require(const QuantContext& ctx, const std::string& name, const std::string& needed_by) {
  const TensorView* v = ctx.store->find(name);
  if (!v) throw Error(needed_by + ": companion tensor " + name + " is missing");
  return *v;
}

std::string module_path(const std::string& name) {
  static const std::string kWeight = ".weight";
  if (name.size() > kWeight.size() && name.compare(name.size() - kWeight.size(), kWeight.size(), kWeight) == 0)
    return name.substr(0, name.size() - kWeight.size());
  return name;
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void set_logical_shape(QuantizedWeight& q, const std::vector<int64_t>& shape) {
  q.cols = shape.empty() ? 1 : shape.back();
  q.rows = q.cols == 0 ? 0 : product(shape) / q.cols;
}

void add_stored(QuantizedWeight& q, const TensorView& v) {
  q.stored_names.push_back(v.name());
  q.stored_bytes += v.nbytes();
}

}  // namespace quant

namespace {

std::shared_ptr<QuantizedWeight> read_one(const QuantContext& ctx, const ExpectedTensor& ex, const std::string& name) {
  switch (ctx.kind) {
    case CheckpointQuant::kBitsAndBytes: return quant::read_bnb_nf4(ctx, ex, name);
    case CheckpointQuant::kModelOpt: return quant::read_modelopt_nvfp4(ctx, ex, name);
    case CheckpointQuant::kMlx: return quant::read_mlx_affine(ctx, ex, name);
    case CheckpointQuant::kGguf: return quant::read_gguf_blocks(ctx, ex, name);
    case CheckpointQuant::kNone: return nullptr;
  }
  return nullptr;
}

// Components whose ops dispatch on WeightRef::quant (backend/cpu/quant_kernels.h).
bool has_quantized_path(Component c) {
  return c == Component::kEmbedding || c == Component::kAttention || c == Component::kDenseMlp ||
         c == Component::kSelfConditioning || c == Component::kExperts || c == Component::kVisionLinear;
}

}  // namespace

std::optional<WeightRef> resolve_quantized(const QuantContext& ctx, const ExpectedTensor& ex) {
  std::vector<std::string> names = {ex.name};
  names.insert(names.end(), ex.aliases.begin(), ex.aliases.end());
  std::shared_ptr<QuantizedWeight> found;
  for (const std::string& n : names) {
    std::shared_ptr<QuantizedWeight> q = read_one(ctx, ex, n);
    if (!q) continue;
    if (!found) {
      found = q;
      found->found_as.push_back(n);
    } else {
      found->found_as.push_back(n);  // a quantized tied copy: consumed, not used
      found->stored_names.insert(found->stored_names.end(), q->stored_names.begin(), q->stored_names.end());
    }
  }
  if (!found) return std::nullopt;
  WeightRef r;
  r.name = ex.name;
  r.dtype = found->dtype;
  r.shape = ex.shape;
  r.data = found->slices.front().codes;
  if (!has_quantized_path(ex.component)) {
    std::vector<uint8_t> dense(size_t(found->rows * found->cols) * 4);
    float* f = reinterpret_cast<float*>(dense.data());
    for (int64_t row = 0; row < found->rows; ++row)
      dequantize_reference(*found, row, 0, found->cols, f + row * found->cols);
    found->owned.push_back(std::move(dense));
    r.data = found->owned.back().data();
    r.dtype = DType::kF32;
    found->bound_dense = true;
  }
  r.quant = found;
  return r;
}

bool is_ignored_quant_tensor(const QuantContext& ctx, const std::string& name) {
  // The full layers' RoPE factors: read into the config (docs/formats.md §5.3).
  if (ctx.kind == CheckpointQuant::kGguf) return name == kGgufRopeFreqsName;
  if (ctx.kind != CheckpointQuant::kModelOpt) return false;
  for (const char* s : {".k_scale", ".v_scale"}) {
    const size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0) return true;
  }
  return false;
}

}  // namespace dgemma
