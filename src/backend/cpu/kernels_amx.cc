// AMX level: everything of the AVX512_BF16 level, with the bf16-pair product
// (kBF16Pairs panels: the dot mode's linear and expert GEMMs, the
// self-conditioning product of a bf16 run) on the AMX tiles (TDPBF16PS). The
// tiles multiply the same bf16 pairs as vdpbf16ps and accumulate in fp32
// (round to nearest even, denormals as zero), 16 × 16 outputs over 32 k per
// instruction: on the 2-vCPU Intel Xeon of bench/README.md about 3.3
// TFLOP/s per core against vdpbf16ps's 0.12. Only the order of the fp32 sums
// differs from the AVX512_BF16 level; each output is one fixed chain over k
// (tile by tile in order), so results do not depend on the row count, the
// blocking or the thread count.
//
// Layouts. A (activations, rounded to bf16 when packed) is row-major bf16
// pairs [rows padded to 16][ceil(K/2)] uint32, so that 16 rows × 16 pairs
// are one A tile (row stride ceil(K/2)·4 bytes). B is the pair panel of
// isa_kernels.h ([ceil(K/2)][kNr][2] bf16 per 32 columns): 16 pairs × 16
// columns are one B tile at a row stride of 128 bytes, columns 16..31 64
// bytes further. C blocks are 32 rows × one 32-column panel = 4 tiles. A
// last k tile of fewer than 16 pairs, or a C block past the matrix edge, goes
// through zero-padded local copies.
#include "backend/cpu/isa_kernels.h"

#include "backend/cpu/amx_tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/isa_target.h"

#include <cstring>

DGEMMA_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,amx-tile,amx-bf16")

namespace dgemma::cpu::amx {
namespace {

constexpr int kRowsPerTile = 16;   // tile rows (A and C rows, B k-pairs)
constexpr int kPairsPerTile = 16;  // 64 bytes per A row
constexpr int kBlockRows = 32;     // C block: 2 × 2 tiles over one 32-column panel

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

using amx_tiles::memory_barrier;
using amx_tiles::TileConfig;

// The tile configuration: tiles 0-3 C (16 × 16 fp32), 4-5 A (16 rows × 16
// pairs), 6-7 B (16 pairs × 16 columns × 2), all 16 rows of 64 bytes.
void configure_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = kRowsPerTile;
  }
  memory_barrier();
  _tile_loadconfig(&c);
}

// Rows of x → row-major bf16 pairs [rows][ceil(k/2)] (k even in the low
// half), rounded with vcvtne2ps2bf16 as the AVX512_BF16 level packs them;
// rows past m up to the next multiple of 16 are zeros.
void pack_a_tiles(const float* x, int64_t ldx, const int32_t* rows, int64_t m, int64_t k, uint32_t* out) {
  const int64_t k2 = (k + 1) / 2, padded = (m + kRowsPerTile - 1) / kRowsPerTile * kRowsPerTile;
  for (int64_t r = 0; r < padded; ++r) {
    uint32_t* o = out + r * k2;
    if (r >= m) {
      std::memset(o, 0, size_t(k2) * 4);
      continue;
    }
    const float* src = x + (rows ? int64_t(rows[r]) : r) * ldx;
    int64_t kk = 0;
    for (; kk + 32 <= k; kk += 32)
      _mm512_storeu_si512(o + kk / 2,
                          (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + kk + 16), _mm512_loadu_ps(src + kk)));
    if (kk < k) {
      const int rem = int(k - kk);
      const __m512 lo = _mm512_maskz_loadu_ps(rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1u), src + kk);
      const __m512 hi =
          rem > 16 ? _mm512_maskz_loadu_ps(__mmask16((1u << (rem - 16)) - 1u), src + kk + 16) : _mm512_setzero_ps();
      const int words = (rem + 1) / 2;
      _mm512_mask_storeu_epi32(o + kk / 2, __mmask16((1u << words) - 1u), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

// One C block: rows [0, rows) (≤ 32) × cols [0, cols) (≤ 32) of C at c (row
// stride ldc) [+]= A (a0: row block of 16 rows, a1 the next or null; row
// stride lda pairs) · B panel bp (row stride kNr pairs), over k2 pairs.
void block(const uint32_t* a0, const uint32_t* a1, int64_t lda, const uint16_t* bp, int64_t k2, float* c, int64_t ldc,
           int rows, int cols, bool load_c) {
  const bool full = rows == kBlockRows && cols == kNr;
  alignas(64) float local[kBlockRows * kNr];
  float* cb = full ? c : local;
  const int64_t ldb = full ? ldc : kNr;
  if (!full && load_c) {
    std::memset(local, 0, sizeof local);
    for (int r = 0; r < rows; ++r) std::memcpy(local + r * kNr, c + r * ldc, size_t(cols) * 4);
  }
  const size_t cstride = size_t(ldb) * 4;
  memory_barrier();
  if (load_c) {
    _tile_loadd(0, cb, cstride);
    _tile_loadd(1, cb + 16, cstride);
    if (a1) {
      _tile_loadd(2, cb + 16 * ldb, cstride);
      _tile_loadd(3, cb + 16 * ldb + 16, cstride);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const size_t astride = size_t(lda) * 4, bstride = size_t(kNr) * 4;
  int64_t kt = 0;
  for (; kt + kPairsPerTile <= k2; kt += kPairsPerTile) {
    const uint16_t* b = bp + kt * 2 * kNr;
    _tile_loadd(4, a0 + kt, astride);
    _tile_loadd(6, b, bstride);
    _tile_loadd(7, b + 32, bstride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (a1) {
      _tile_loadd(5, a1 + kt, astride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (kt < k2) {  // a last tile of fewer than 16 pairs, zero-padded
    const int64_t tail = k2 - kt;
    alignas(64) uint32_t ta[2][kRowsPerTile * kPairsPerTile] = {};
    alignas(64) uint16_t tb[kPairsPerTile * 2 * kNr] = {};
    for (int r = 0; r < kRowsPerTile; ++r) {
      std::memcpy(ta[0] + r * kPairsPerTile, a0 + r * lda + kt, size_t(tail) * 4);
      if (a1) std::memcpy(ta[1] + r * kPairsPerTile, a1 + r * lda + kt, size_t(tail) * 4);
    }
    std::memcpy(tb, bp + kt * 2 * kNr, size_t(tail) * 2 * kNr * 2);
    memory_barrier();
    _tile_loadd(4, ta[0], 64);
    _tile_loadd(6, tb, bstride);
    _tile_loadd(7, tb + 32, bstride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (a1) {
      _tile_loadd(5, ta[1], 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, cb, cstride);
  _tile_stored(1, cb + 16, cstride);
  if (a1) {
    _tile_stored(2, cb + 16 * ldb, cstride);
    _tile_stored(3, cb + 16 * ldb + 16, cstride);
  }
  memory_barrier();
  if (!full)
    for (int r = 0; r < rows; ++r) std::memcpy(c + r * ldc, local + r * kNr, size_t(cols) * 4);
}

const IsaKernels* base() { return avx512bf16::table(); }

void gemm_impl(const GemmArgs& g, const GemmRange& r, float* scratch) {
  if (g.b.type != PanelType::kBF16Pairs) return base()->gemm(g, r, scratch);
  const uint32_t* A = static_cast<const uint32_t*>(g.a);
  const int64_t K = g.k, N = g.n, K2 = (K + 1) / 2;
  const int64_t nc = g.b.rows ? kNcPanels : 1;
  configure_tiles();
  for (int64_t pb = r.p0; pb < r.p1; pb += nc) {
    const int64_t pe = min64(pb + nc, r.p1);
    for (int64_t kc = 0; kc < K; kc += kKc) {  // kKc is even: blocks start on a pair
      const int64_t kcl = min64(kKc, K - kc), k2 = (kcl + 1) / 2;
      const bool load_c = g.accumulate || kc > 0;
      const int64_t stride = kKc * kNr;  // per packed panel in scratch (uint16 units)
      if (g.b.rows)
        base()->pack_b_pairs(static_cast<const uint16_t*>(g.b.rows), g.b.ld, N, K, kc, kcl, pb, pe, stride,
                             reinterpret_cast<uint16_t*>(scratch));
      for (int64_t p = pb; p < pe; ++p) {
        const uint16_t* bp = g.b.rows ? reinterpret_cast<const uint16_t*>(scratch) + (p - pb) * stride
                                      : static_cast<const uint16_t*>(g.b.panels) + p * g.b.panel_stride + kc * kNr;
        const int cols = int(min64(kNr, N - p * kNr));
        for (int64_t mb = r.m0; mb < r.m1; mb += kBlockRows) {
          const int rows = int(min64(kBlockRows, r.m1 - mb));
          const uint32_t* a0 = A + mb * K2 + kc / 2;
          const uint32_t* a1 = rows > kRowsPerTile ? a0 + kRowsPerTile * K2 : nullptr;
          block(a0, a1, K2, bp, k2, g.c + mb * g.ldc + p * kNr, g.ldc, rows, cols, load_c);
        }
      }
    }
  }
  _tile_release();
}

// Peak of the tiles: 4 independent accumulators (tiles 0-3) on fixed A and B.
double peak_dot_impl(int64_t iters, float seed) {
  configure_tiles();
  alignas(64) uint16_t ab[kRowsPerTile * 32];
  const uint16_t v = uint16_t(0x3a80 + (int(seed) & 7));  // a small bf16
  for (uint16_t& e : ab) e = v;
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  memory_barrier();
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  memory_barrier();
  volatile float sink = out[0];
  (void)sink;
  return double(iters) * 4 * 16 * 16 * 32 * 2;
}

}  // namespace

const IsaKernels* table() {
  static const IsaKernels t = [] {
    IsaKernels k = *base();
    k.isa = CpuIsa::kAmx;
    k.mr = kRowsPerTile;
    k.pack_a_pairs = pack_a_tiles;
    k.gemm = gemm_impl;
    k.peak_dot = peak_dot_impl;
    return k;
  }();
  return &t;
}

}  // namespace dgemma::cpu::amx

DGEMMA_ISA_END()

#endif  // __x86_64__ (cpu_levels.cc calls the level only there)
