#include "quantize/quantizers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>

#include "dgemma/error.h"
#include "quantize/format_tables.h"
#include "quantize/scheme_traits.h"

namespace dgemma::quant {
namespace {

constexpr int64_t kChunk = 1 << 14;  // elements read per step

void store_scale(DType t, float v, uint8_t* dst) {
  if (t == DType::kF32) {
    std::memcpy(dst, &v, 4);
  } else {
    const uint16_t h = t == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
    std::memcpy(dst, &h, 2);
  }
}

float rounded(DType t, float v) {
  if (t == DType::kBF16) return round_bf16(v);
  if (t == DType::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
}

// Splits [0, n) into contiguous ranges over up to `threads` threads (the
// caller runs the first), at least `min_items` items each.
void parallel_ranges(int64_t n, int threads, int64_t min_items, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t t = std::clamp<int64_t>(n / std::max<int64_t>(1, min_items), 1, resolve_quantize_threads(threads));
  if (t <= 1) return fn(0, n);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(t));
  auto run = [&](int64_t i) {
    try {
      fn(n * i / t, n * (i + 1) / t);
    } catch (...) {
      errors[size_t(i)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int64_t i = 1; i < t; ++i) workers.emplace_back(run, i);
  run(0);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

constexpr int64_t kMinElemsPerThread = int64_t(1) << 18;

}  // namespace

int resolve_quantize_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? int(hw) : 1;
}

void FloatSource::read(int64_t begin, int64_t n, float* out) const {
  if (dtype == DType::kF32) {
    std::memcpy(out, static_cast<const float*>(data) + begin, size_t(n) * 4);
  } else if (dtype == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(data) + 2 * (begin + i), 2);
      out[i] = bf16_to_f32(h);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = load_as_f32(dtype, data, size_t(begin + i));
  }
}

float abs_max(const FloatSource& src, int64_t begin, int64_t n) {
  std::vector<float> buf(size_t(std::min(n, kChunk)));
  float m = 0.0f;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t c = std::min(kChunk, n - i);
    src.read(begin + i, c, buf.data());
    for (int64_t k = 0; k < c; ++k) m = std::max(m, std::fabs(buf[size_t(k)]));
  }
  return m;
}

Nf4Packed quantize_nf4(const FloatSource& src, int blocksize, bool double_quant, int nested_blocksize, int threads) {
  Nf4Packed p;
  p.blocksize = blocksize;
  p.double_quant = double_quant;
  p.nested_blocksize = nested_blocksize;
  const int64_t n = src.numel, blocks = (n + blocksize - 1) / blocksize;
  p.codes.assign(size_t((n + 1) / 2), 0);
  std::vector<float> absmax(static_cast<size_t>(blocks));
  // Threads own whole blocks; with an even block size they own whole bytes.
  parallel_ranges(blocks, blocksize % 2 == 0 ? threads : 1, kMinElemsPerThread / blocksize,
                  [&](int64_t b0, int64_t b1) {
                    std::vector<float> buf(static_cast<size_t>(blocksize));
                    for (int64_t b = b0; b < b1; ++b) {
                      const int64_t i0 = b * blocksize, cnt = std::min<int64_t>(blocksize, n - i0);
                      src.read(i0, cnt, buf.data());
                      float a = 0.0f;
                      for (int64_t k = 0; k < cnt; ++k) a = std::max(a, std::fabs(buf[size_t(k)]));
                      absmax[size_t(b)] = a;
                      for (int64_t k = 0; k < cnt; ++k) {
                        const uint8_t c = nearest_code16(kNf4Values, a > 0.0f ? buf[size_t(k)] / a : 0.0f);
                        const int64_t i = i0 + k;
                        p.codes[size_t(i / 2)] |= (i % 2 == 0) ? uint8_t(c << 4) : c;
                      }
                    }
                  });
  if (!double_quant) {
    p.absmax = std::move(absmax);
    return p;
  }
  nf4_double_quantize(absmax, nested_blocksize, p);
  return p;
}

void nf4_double_quantize(const std::vector<float>& absmax, int nested_blocksize, Nf4Packed& p) {
  // §2.3: A - mean(A) coded with the dynamic map, blocks of nested_blocksize.
  const int64_t blocks = int64_t(absmax.size());
  p.double_quant = true;
  p.nested_blocksize = nested_blocksize;
  double sum = 0.0;
  for (float a : absmax) sum += a;
  p.nested_offset = blocks ? float(sum / double(blocks)) : 0.0f;
  const float* map = bnb_dynamic_map();
  const int64_t nblocks = (blocks + nested_blocksize - 1) / nested_blocksize;
  p.absmax_codes.resize(size_t(blocks));
  p.nested_absmax.resize(size_t(nblocks));
  for (int64_t nb = 0; nb < nblocks; ++nb) {
    const int64_t b0 = nb * nested_blocksize, b1 = std::min<int64_t>(blocks, b0 + nested_blocksize);
    float m = 0.0f;
    for (int64_t b = b0; b < b1; ++b) m = std::max(m, std::fabs(absmax[size_t(b)] - p.nested_offset));
    p.nested_absmax[size_t(nb)] = m;
    for (int64_t b = b0; b < b1; ++b)
      p.absmax_codes[size_t(b)] = nearest_code256(map, m > 0.0f ? (absmax[size_t(b)] - p.nested_offset) / m : 0.0f);
  }
}

float nvfp4_global_scale(float amax) { return amax > 0.0f ? amax / (6.0f * 448.0f) : 1.0f; }

Nvfp4Packed quantize_nvfp4(const FloatSource& src, int64_t row0, int64_t rows, int64_t cols, float global_scale,
                           int threads) {
  if (cols % 16 != 0) throw Error("NVFP4 quantization needs a multiple of 16 columns, got " + std::to_string(cols));
  Nvfp4Packed p;
  p.global_scale = global_scale;
  p.codes.assign(size_t(rows * cols / 2), 0);
  p.scales.resize(size_t(rows * cols / 16));
  const float* e4m3 = e4m3_table();
  parallel_ranges(rows, threads, kMinElemsPerThread / std::max<int64_t>(1, cols), [&](int64_t ra, int64_t rb) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = ra; r < rb; ++r) {
      src.read((row0 + r) * cols, cols, row.data());
      for (int64_t b = 0; b < cols / 16; ++b) {
        const float* x = row.data() + b * 16;
        float a = 0.0f;
        for (int k = 0; k < 16; ++k) a = std::max(a, std::fabs(x[k]));
        uint8_t sc = 0x38;  // 1.0 for an all-zero block
        if (a > 0.0f) sc = f32_to_e4m3(std::clamp(a / (6.0f * global_scale), 0.001953125f, 448.0f));
        p.scales[size_t(r * (cols / 16) + b)] = sc;
        const float denom = e4m3[sc] * global_scale;
        for (int k = 0; k < 16; ++k) {
          const uint8_t c = nearest_e2m1(denom > 0.0f ? x[k] / denom : 0.0f);
          const int64_t col = b * 16 + k;
          p.codes[size_t(r * (cols / 2) + col / 2)] |= (col % 2 == 0) ? c : uint8_t(c << 4);
        }
      }
    }
  });
  return p;
}

AffinePacked quantize_affine(const FloatSource& src, int64_t rows, int64_t cols, int bits, int group, DType scale_dtype,
                             int threads) {
  if (bits != 4 && bits != 8) throw Error("MLX affine quantization: unsupported bits " + std::to_string(bits));
  if (group <= 0 || cols % group != 0 || (cols * bits) % 32 != 0)
    throw Error("MLX affine quantization: " + std::to_string(cols) + " columns do not fit group " +
                std::to_string(group) + " and " + std::to_string(bits) + "-bit u32 packing");
  const int ssize = scale_dtype == DType::kF32 ? 4 : 2;
  const int levels = (1 << bits) - 1;
  AffinePacked p;
  p.codes.assign(size_t(rows * cols * bits / 8), 0);
  p.scales.resize(size_t(rows * (cols / group) * ssize));
  p.biases.resize(p.scales.size());
  parallel_ranges(rows, threads, kMinElemsPerThread / std::max<int64_t>(1, cols), [&](int64_t ra, int64_t rb) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = ra; r < rb; ++r) {
      src.read(r * cols, cols, row.data());
      for (int64_t g = 0; g < cols / group; ++g) {
        const float* x = row.data() + g * group;
        float mn = x[0], mx = x[0];
        for (int k = 1; k < group; ++k) {
          mn = std::min(mn, x[k]);
          mx = std::max(mx, x[k]);
        }
        const float scale = rounded(scale_dtype, (mx - mn) / float(levels));
        const float bias = rounded(scale_dtype, mn);
        const size_t at = size_t(r * (cols / group) + g);
        store_scale(scale_dtype, scale, p.scales.data() + at * size_t(ssize));
        store_scale(scale_dtype, bias, p.biases.data() + at * size_t(ssize));
        for (int k = 0; k < group; ++k) {
          int q = 0;
          if (scale > 0.0f) q = std::clamp(int(std::lround((x[k] - bias) / scale)), 0, levels);
          const int64_t col = g * group + k;
          if (bits == 8)
            p.codes[size_t(r * cols + col)] = uint8_t(q);
          else
            p.codes[size_t(r * (cols / 2) + col / 2)] |= (col % 2 == 0) ? uint8_t(q) : uint8_t(q << 4);
        }
      }
    }
  });
  return p;
}

namespace {

// Blocks of `block` columns of each row: scale = amax / qmax (NaN left out of
// the maximum), codes[k] = code(x[k], scale) for the block's values. The
// int8 and FP8 quantizers differ only in qmax and the code.
template <class Code>
void quantize_row_blocks(const FloatSource& src, int64_t rows, int64_t cols, int block, float qmax, int threads,
                         const char* format, std::vector<uint8_t>& codes, std::vector<float>& scales, Code code) {
  if (block <= 0 || cols % block != 0)
    throw Error(std::string(format) + " quantization: block " + std::to_string(block) + " does not divide " +
                std::to_string(cols));
  codes.resize(size_t(rows * cols));
  scales.resize(size_t(rows * (cols / block)));
  parallel_ranges(rows, threads, kMinElemsPerThread / std::max<int64_t>(1, cols), [&](int64_t ra, int64_t rb) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = ra; r < rb; ++r) {
      src.read(r * cols, cols, row.data());
      for (int64_t g = 0; g < cols / block; ++g) {
        const float* x = row.data() + g * block;
        float a = 0.0f;
        for (int k = 0; k < block; ++k) a = std::max(a, std::fabs(x[k]));
        const float s = a / qmax;
        scales[size_t(r * (cols / block) + g)] = s;
        for (int k = 0; k < block; ++k) codes[size_t(r * cols + g * block + k)] = code(x[k], s);
      }
    }
  });
}

}  // namespace

Int8Packed quantize_int8(const FloatSource& src, int64_t rows, int64_t cols, int block, int threads) {
  Int8Packed p;
  quantize_row_blocks(src, rows, cols, block, 127.0f, threads, "int8", p.codes, p.scales, [](float x, float s) {
    return uint8_t(int8_t(s > 0.0f ? std::clamp(int(std::lround(x / s)), -127, 127) : 0));
  });
  return p;
}

Fp8Packed quantize_fp8(const FloatSource& src, int64_t rows, int64_t cols, int block, int threads) {
  Fp8Packed p;
  quantize_row_blocks(src, rows, cols, block, 448.0f, threads, "fp8", p.codes, p.scales, [](float x, float s) {
    return s > 0.0f ? f32_to_e4m3(x / s) : std::isnan(x) ? uint8_t(0x7f) : uint8_t(0);
  });
  return p;
}

int row_block_for(int64_t cols, int preferred) {
  for (int b : {preferred, 64, 32, 16})
    if (b > 0 && cols % b == 0) return b;
  return 0;
}

namespace {

const uint8_t* own(QuantizedWeight& q, std::vector<uint8_t>&& bytes) {
  q.stored_bytes += bytes.size();
  q.owned.push_back(std::move(bytes));
  return q.owned.back().data();
}

const uint8_t* own(QuantizedWeight& q, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return own(q, std::move(bytes));
}

}  // namespace

std::shared_ptr<QuantizedWeight> quantize_weight(QuantScheme scheme, const FloatSource& src,
                                                 const std::vector<int64_t>& shape, DType dtype,
                                                 const QuantizeParams& params) {
  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = scheme;
  q->shape = shape;
  q->dtype = dtype;
  q->cols = shape.back();
  q->rows = q->cols ? src.numel / q->cols : 0;
  // What the scheme fixes (scheme_traits.h); the rest is chosen per case below.
  const SchemeTraits& traits = scheme_traits(scheme);
  if (traits.code_bits) q->bits = traits.code_bits;
  if (traits.fixed_block) q->block = traits.fixed_block;
  if (traits.scale_dtype) q->scale_dtype = *traits.scale_dtype;
  QuantSlice whole;
  whole.rows = q->rows;
  switch (scheme) {
    case QuantScheme::kNF4: {
      Nf4Packed p = quantize_nf4(src, params.block ? params.block : 64, params.double_quant, 256, params.threads);
      q->block = p.blocksize;
      std::copy(std::begin(kNf4Values), std::end(kNf4Values), q->code_map);
      whole.codes = own(*q, std::move(p.codes));
      if (p.double_quant) {
        q->double_quant = true;
        q->nested_block = p.nested_blocksize;
        q->nested_offset = p.nested_offset;
        std::copy(bnb_dynamic_map(), bnb_dynamic_map() + 256, q->nested_map);
        q->scale_dtype = DType::kU8;
        whole.scales = own(*q, std::move(p.absmax_codes));
        q->nested_scales = own(*q, p.nested_absmax);
      } else {
        q->scale_dtype = DType::kF32;
        whole.scales = own(*q, p.absmax);
      }
      q->slices.push_back(whole);
      q->describe = std::string("nf4") + (p.double_quant ? " (double quant)" : "");
      break;
    }
    case QuantScheme::kNVFP4: {
      const int64_t slice_rows = params.slice_rows ? params.slice_rows : q->rows;
      const int64_t scale_rows = params.scale_rows ? params.scale_rows : slice_rows;
      if (q->rows % scale_rows != 0 || scale_rows % slice_rows != 0)
        throw Error("NVFP4 quantization: slice rows do not divide the weight");
      for (int64_t s0 = 0; s0 < q->rows; s0 += scale_rows) {
        const float g = nvfp4_global_scale(abs_max(src, s0 * q->cols, scale_rows * q->cols));
        for (int64_t r0 = s0; r0 < s0 + scale_rows; r0 += slice_rows) {
          Nvfp4Packed p = quantize_nvfp4(src, r0, slice_rows, q->cols, g, params.threads);
          QuantSlice s;
          s.row_begin = r0;
          s.rows = slice_rows;
          s.codes = own(*q, std::move(p.codes));
          s.scales = own(*q, std::move(p.scales));
          s.global_scale = p.global_scale;
          q->slices.push_back(s);
        }
      }
      q->describe = "nvfp4";
      break;
    }
    case QuantScheme::kAffine: {
      q->bits = params.bits;
      q->block = params.block ? params.block : row_block_for(q->cols, 64);
      q->scale_dtype = dtype == DType::kF32 ? DType::kF32 : dtype;
      AffinePacked p = quantize_affine(src, q->rows, q->cols, q->bits, q->block, q->scale_dtype, params.threads);
      whole.codes = own(*q, std::move(p.codes));
      whole.scales = own(*q, std::move(p.scales));
      whole.biases = own(*q, std::move(p.biases));
      q->slices.push_back(whole);
      q->describe = "affine " + std::to_string(q->bits) + "-bit group " + std::to_string(q->block);
      break;
    }
    case QuantScheme::kInt8: {
      q->block = params.block ? params.block : row_block_for(q->cols, 64);
      Int8Packed p = quantize_int8(src, q->rows, q->cols, q->block, params.threads);
      whole.codes = own(*q, std::move(p.codes));
      whole.scales = own(*q, std::move(p.scales));
      q->slices.push_back(whole);
      q->describe = "int8 block " + std::to_string(q->block);
      break;
    }
    case QuantScheme::kFP8: {
      q->block = params.block ? params.block : int(q->cols);
      Fp8Packed p = quantize_fp8(src, q->rows, q->cols, q->block, params.threads);
      whole.codes = own(*q, std::move(p.codes));
      whole.scales = own(*q, std::move(p.scales));
      q->slices.push_back(whole);
      q->describe = q->block == q->cols ? "fp8 e4m3 per channel" : "fp8 e4m3 block " + std::to_string(q->block);
      break;
    }
    case QuantScheme::kGgml:
      throw Error("quantize at load writes nf4, nvfp4, affine, int8 or fp8; ggml blocks come from GGUF files");
  }
  return q;
}

}  // namespace dgemma::quant
