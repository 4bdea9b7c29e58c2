// The integer-dot GEMM driver (int8_dot.h): quantizes the activation rows
// once, then per tile of 16 weight rows and K-chunk of kChunk columns decodes
// the stored codes into int16 values (row by row, then interleaved in pairs
// for vpmaddwd) and the block scales, and streams every activation row past
// the tile. A quantized weight is never expanded beyond one chunk.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/scratch.h"
#include "backend/cpu/int8_dot.h"
#include "backend/cpu/int8_dot_ggml.h"
#include "backend/cpu/quant_kernels.h"
#include "quantize/format_tables.h"
#include "quantize/scheme_traits.h"

namespace dgemma::cpu {
namespace {

// Columns per decoded chunk: 16 rows × 512 int16 = 16 KB, which stays in L1
// while the activation rows stream past. A multiple of 32.
constexpr int64_t kChunk = 512;

// What decoding a weight needs besides the weight (prepared once per GEMM).
// The scale loops step through blocks incrementally: a 64-bit division per
// sub-block costs more than the rest of the decode.
struct Decoder {
  const QuantizedWeight& w;
  int sub = kI8Block;                                    // columns per weight scale: 32, or 16 for NVFP4
  bool bias = false;                                     // MLX affine
  I8Values values = I8Values::kS8;                       // the range of the decoded values
  NibbleTable table{};                                   // 4-bit code → integer value
  float nf4_factor = 0;                                  // NF4: cmax / 32767
  int64_t ggml_elems = 0, ggml_bytes = 0, ggml_row = 0;  // ggml: block elements and bytes, row bytes

  explicit Decoder(const QuantizedWeight& qw) : w(qw) {
    const Int8WeightValues wv = int8_weight_values(qw);
    sub = wv.sub;
    bias = wv.bias;
    values = wv.values;
    nf4_factor = wv.nf4_factor;
    table = nibble_table(wv.levels);
    if (qw.scheme == QuantScheme::kGgml) {
      const GgmlTypeTraits& g = ggml_traits(qw.ggml_type);
      ggml_elems = g.block_elems;
      ggml_bytes = g.block_bytes;
      ggml_row = int64_t(ggml_row_bytes(qw.ggml_type, qw.cols));
    }
  }

  // The stored codes of row r, columns [k0, k0 + kc): where they start and
  // how many bytes they take.
  std::pair<const uint8_t*, int64_t> codes(int64_t r, int64_t k0, int64_t kc) const {
    const int64_t K = w.cols;
    if (w.scheme == QuantScheme::kNF4) return {w.slices.front().codes + (r * K + k0) / 2, kc / 2};
    const QuantSlice& sl = w.slice_for(r);
    const int64_t lr = r - sl.row_begin;
    if (w.scheme == QuantScheme::kGgml)  // whole blocks: k0 and kc are multiples of the block
      return {sl.codes + ggml_row * lr + k0 / ggml_elems * ggml_bytes, kc / ggml_elems * ggml_bytes};
    if (!four_bit()) return {sl.codes + lr * K + k0, kc};
    return {sl.codes + lr * (K / 2) + k0 / 2, kc / 2};
  }

  // Asks for the codes of row r, columns [k0, k0 + kc), to be brought into
  // the cache. A tile reads 16 rows' codes in runs of a few cache lines at
  // the row stride, too short for the hardware prefetchers: without this
  // each run waits for memory in turn.
  void prefetch(int64_t r, int64_t k0, int64_t kc) const {
    const auto [p, n] = codes(r, k0, kc);
    for (int64_t o = 0; o < n; o += 64) __builtin_prefetch(p + o, 0, 3);
    __builtin_prefetch(p + n - 1, 0, 3);
  }

  // Whether the codes are 4-bit (two per byte: pair p of a row is its byte
  // p), and which nibble holds the even column.
  bool four_bit() const { return w.scheme != QuantScheme::kGgml && code_bits(w) == 4; }
  // Whether the level multiplies this weight's levels as bytes (ggml
  // blocks, every level of which fits int8).
  bool bytes(const Int8DotIsa& isa) const {
    return isa.byte_tile && w.scheme == QuantScheme::kGgml && ggml_level_bound(w.ggml_type) <= isa.byte_max_level;
  }
  bool high_first() const { return scheme_traits(w.scheme).high_nibble_first; }

  // Row r, columns [k0, k0 + kc): values into v (int8_dot.h's row format of
  // the level).
  void decode(const Int8DotIsa& isa, int64_t r, int64_t k0, int64_t kc, int16_t* v) const {
    const uint8_t* c = codes(r, k0, kc).first;
    if (w.scheme == QuantScheme::kGgml) {  // the levels as bytes, then the level's row format
      alignas(64) uint8_t levels[kChunk];
      isa.ggml_levels(w.ggml_type, c, kc, levels);
      isa.bytes(levels, kc, values == I8Values::kS8, v);
    } else if (four_bit())
      isa.nibbles(c, kc, high_first(), table, v);
    else
      isa.bytes(c, kc, w.scheme == QuantScheme::kInt8, v);
  }

  // The whole rows [r0, r0 + nr) of a tile (nr ≤ 16): the scale of
  // sub-block s of row j into ws[s·16 + j], the bias of block b into
  // wb[b·16 + j]; zero for rows nr..15. ggml blocks decode the 16 rows
  // together (their scales read every block header of the rows).
  void tile_scales(int64_t r0, int nr, float* ws, float* wb) const {
    const int64_t K = w.cols;
    if (w.scheme == QuantScheme::kGgml) {
      const uint8_t* rows[kI8TileRows] = {};
      for (int j = 0; j < nr; ++j) rows[j] = codes(r0 + j, 0, K).first;
      return ggml_scales_tile(w.ggml_type, rows, nr, K, ws, wb);
    }
    for (int j = 0; j < nr; ++j) scales(r0 + j, 0, K, ws + j, wb + j);
    for (int j = nr; j < kI8TileRows; ++j) {  // past the last weight row: zero scales
      for (int64_t s = 0; s < K / sub; ++s) ws[s * kI8TileRows + j] = 0.0f;
      for (int64_t s = 0; s < K / kI8Block; ++s) wb[s * kI8TileRows + j] = 0.0f;
    }
  }

  // Row r, columns [k0, k0 + kc), of the formats other than ggml blocks:
  // the scale of sub-block s into ws[s·16], the bias of block b into wb[b·16].
  void scales(int64_t r, int64_t k0, int64_t kc, float* ws, float* wb) const {
    const int64_t K = w.cols, nsub = kc / sub;
    switch (w.scheme) {
      case QuantScheme::kNF4: {
        const int64_t i = r * K + k0;  // blocks run over the flattened tensor (docs/formats.md §2.2)
        // One absmax per NF4 block, shared by its sub-blocks; with double
        // quantization absmax = map[code[b]] · nested[b / nested_block] +
        // offset (QuantizedWeight::nf4_block_scale), the nested index
        // stepped along instead of divided per block.
        const int64_t per = w.block / sub;
        int64_t b = i / w.block, left = per - (i % w.block) / sub;
        const uint8_t* absmax = w.slices.front().scales;
        int64_t nested = w.double_quant ? b / w.nested_block : 0;
        int64_t nested_left = w.double_quant ? w.nested_block - b % w.nested_block : 0;
        float nested_scale = 0.0f;
        if (w.double_quant) std::memcpy(&nested_scale, w.nested_scales + 4 * nested, 4);
        const auto block_scale = [&] {
          if (!w.double_quant) return w.nf4_block_scale(b);
          if (nested_left == 0) {
            std::memcpy(&nested_scale, w.nested_scales + 4 * ++nested, 4);
            nested_left = w.nested_block;
          }
          return w.nested_map[absmax[b]] * nested_scale + w.nested_offset;
        };
        float scale = block_scale() * nf4_factor;
        for (int64_t s = 0; s < nsub; ++s, --left) {
          if (left == 0) {
            ++b, --nested_left, left = per;
            scale = block_scale() * nf4_factor;
          }
          ws[s * kI8TileRows] = scale;
        }
        return;
      }
      case QuantScheme::kNVFP4: {
        const QuantSlice& sl = w.slice_for(r);
        const int64_t lr = r - sl.row_begin;
        const float* e4m3 = quant::e4m3_table();
        const uint8_t* sc = sl.scales + lr * (K / 16) + k0 / 16;
        for (int64_t s = 0; s < nsub; ++s) ws[s * kI8TileRows] = (e4m3[sc[s]] * sl.global_scale) * 0.5f;
        return;
      }
      case QuantScheme::kAffine:
      case QuantScheme::kInt8: {
        const QuantSlice& sl = w.slice_for(r);
        const int64_t lr = r - sl.row_begin;
        // Groups are a multiple of 32 columns and start on row boundaries.
        const int64_t per = w.block / kI8Block;
        const DType st = scheme_traits(w.scheme).scale_dtype.value_or(w.scale_dtype);
        int64_t g = lr * (K / w.block) + k0 / w.block, left = per - (k0 % w.block) / kI8Block;
        float scale = load_scale(st, sl.scales, g), b = bias ? load_scale(st, sl.biases, g) : 0.0f;
        for (int64_t s = 0; s < nsub; ++s, --left) {
          if (left == 0) {
            ++g;
            left = per;
            scale = load_scale(st, sl.scales, g);
            if (bias) b = load_scale(st, sl.biases, g);
          }
          ws[s * kI8TileRows] = scale;
          if (bias) wb[s * kI8TileRows] = b;
        }
        return;
      }
      case QuantScheme::kGgml: return;  // never here: tile_scales()
      case QuantScheme::kFP8: return;   // never here: int8_dot_supported
    }
  }
};

}  // namespace

namespace {

// Per-thread buffers of one tile.
struct TileBuffers {
  std::vector<int16_t> rows = std::vector<int16_t>(size_t(kI8TileRows * kChunk));
  std::vector<int16_t> v = std::vector<int16_t>(size_t(kI8TileRows * kChunk));
  std::vector<float> ws, wb;  // a whole row's scales and biases (K/16 and K/32 per weight row)
  std::vector<int32_t> wsum = std::vector<int32_t>(size_t(kChunk));  // byte tiles: ΣV per sub-block and row
  std::vector<float> acc;
  explicit TileBuffers(int64_t K) : ws(size_t(K / 16 * kI8TileRows)), wb(size_t(K / kI8Block * kI8TileRows)) {}
};

// Weight rows [row0 + j0, row0 + j0 + nr) (nr ≤ 16) against activation rows
// [m0, m1) of a: out[(m - m0)·ld_out + j0 + j]. The scales of the whole rows
// first (once per tile: their block arithmetic costs as much as a chunk's
// decode), then chunk by chunk the codes.
void run_tile(const Int8DotIsa& isa, const Decoder& dec, const Int8Activations& a, int64_t row0, int64_t j0, int nr,
              int64_t m0, int64_t m1, TileBuffers& b, float* out, int64_t ld_out) {
  const int64_t K = a.k;
  // ggml blocks keep their scales among the codes: the scales below read
  // every block of the rows, so the whole rows are asked for first.
  const int64_t ahead = dec.ggml_elems ? K : std::min(kChunk, K);
  for (int j = 0; j < nr; ++j) dec.prefetch(row0 + j0 + j, 0, ahead);
  b.acc.assign(size_t((m1 - m0) * kI8TileRows), 0.0f);
  dec.tile_scales(row0 + j0, nr, b.ws.data(), b.wb.data());
  for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
    const int64_t kc = std::min(kChunk, K - k0);
    if (k0 + kc < K && !dec.ggml_elems)  // the next chunk's codes arrive while this one is decoded and multiplied
      for (int j = 0; j < nr; ++j) dec.prefetch(row0 + j0 + j, k0 + kc, std::min(kChunk, K - k0 - kc));
    if (dec.bytes(isa)) {  // byte levels as quads of columns, multiplied as bytes
      auto* rows = reinterpret_cast<int8_t*>(b.rows.data());
      auto* v = reinterpret_cast<uint8_t*>(b.v.data());
      for (int j = 0; j < nr; ++j)
        isa.ggml_levels(dec.w.ggml_type, dec.codes(row0 + j0 + j, k0, kc).first, kc,
                        reinterpret_cast<uint8_t*>(rows + j * kChunk));
      for (int j = nr; j < kI8TileRows; ++j) std::fill_n(rows + j * kChunk, kc, int8_t(0));
      isa.byte_quads(rows, kChunk, kc, dec.sub, v, b.wsum.data());
      isa.byte_tile(a, m0, m1, k0, kc, dec.sub, v, b.wsum.data(), b.ws.data() + (k0 / dec.sub) * kI8TileRows,
                    dec.bias ? b.wb.data() + (k0 / kI8Block) * kI8TileRows : nullptr, b.acc.data());
      continue;
    }
    if (isa.nibble_pairs && dec.four_bit()) {  // straight into the pair layout
      const uint8_t* rows[kI8TileRows] = {};
      for (int j = 0; j < nr; ++j) rows[j] = dec.codes(row0 + j0 + j, k0, kc).first;
      isa.nibble_pairs(rows, nr, kc, dec.high_first(), dec.table, b.v.data());
    } else {
      for (int j = 0; j < nr; ++j) dec.decode(isa, row0 + j0 + j, k0, kc, b.rows.data() + j * kChunk);
      for (int j = nr; j < kI8TileRows; ++j) std::fill_n(b.rows.data() + j * kChunk, kc, int16_t(0));
      isa.interleave(b.rows.data(), kChunk, kc, dec.values, b.v.data());
    }
    isa.tile(a, m0, m1, k0, kc, dec.sub, dec.values, b.v.data(), b.ws.data() + (k0 / dec.sub) * kI8TileRows,
             dec.bias ? b.wb.data() + (k0 / kI8Block) * kI8TileRows : nullptr, b.acc.data());
  }
  for (int64_t m = m0; m < m1; ++m)
    std::copy_n(b.acc.data() + (m - m0) * kI8TileRows, nr, out + (m - m0) * ld_out + j0);
}

// Activations quantized into per-thread buffers reused across calls (and as
// int8 for the levels that read them so, with 16 zero rows after the last;
// and as byte panels for the byte levels, one starting at each row of
// `starts` and every kBytePanelRows rows after it up to its end).
// One live instance per thread at a time: the GEMMs below build theirs on
// the calling thread and drop it before returning.
struct QuantizedRows {
  Int8Activations a;
  QuantizedRows(const Int8DotIsa& isa, bool bytes, const float* x, int64_t M, int64_t K,
                const std::vector<std::pair<int64_t, int64_t>>& ranges, ThreadPool& pool) {
    thread_local Scratch<int16_t> q;
    thread_local Scratch<float> d, ds;
    thread_local Scratch<int8_t> q8;
    const int64_t nb = K / kI8Block, panels = (K + 63) / 64, panel_rows = M + kI8TileRows;
    a = Int8Activations{M,
                        K,
                        K,
                        nb,
                        q.get(size_t(M * K)),
                        d.get(size_t(M * nb)),
                        ds.get(size_t(M * nb)),
                        isa.int8_rows ? q8.get(size_t(panels * panel_rows * 64)) : nullptr};
    int8_t* q8p = const_cast<int8_t*>(a.q8);
    pool.parallel_for(M, 8, [&](int64_t b, int64_t e) {
      isa.quantize_rows(x, K, b, e, a);
      if (q8p)
        for (int64_t m = b; m < e; ++m)
          for (int64_t k0 = 0; k0 < K; k0 += 64) {
            int8_t* dst = q8p + ((k0 / 64) * panel_rows + m) * 64;
            const int16_t* src = a.q + m * K + k0;
            const int64_t n = std::min<int64_t>(64, K - k0);
            for (int64_t k = 0; k < n; ++k) dst[k] = int8_t(src[k]);
            std::fill(dst + n, dst + 64, int8_t(0));
          }
    });
    if (q8p)
      for (int64_t p = 0; p < panels; ++p) std::fill_n(q8p + (p * panel_rows + M) * 64, kI8TileRows * 64, int8_t(0));
    if (bytes) byte_panels(ranges, pool);
  }

 private:
  // The byte panels (Int8Activations::u8): rows m..m + 7 of each panel from
  // q, d and ds, zero past row M.
  void byte_panels(const std::vector<std::pair<int64_t, int64_t>>& ranges, ThreadPool& pool) {
    thread_local Scratch<uint8_t> u8;
    thread_local Scratch<float> d8, ds8;
    thread_local Scratch<int32_t> panel_of_row;
    constexpr int64_t R = kBytePanelRows;
    int32_t* of_row = panel_of_row.get(size_t(a.m));
    std::fill_n(of_row, a.m, -1);
    std::vector<int64_t> start;
    for (const auto& [m0, m1] : ranges)
      for (int64_t m = m0; m < m1; m += R)
        if (of_row[m] < 0) {
          of_row[m] = int32_t(start.size());
          start.push_back(m);
        }
    const int64_t P = int64_t(start.size()), quads = a.kp / 4;
    uint8_t* u = u8.get(size_t(P * a.kp * R));
    float* dp = d8.get(size_t(P * a.nb * R));
    float* dsp = ds8.get(size_t(P * a.nb * R));
    pool.parallel_for(P, 1, [&](int64_t pb, int64_t pe) {
      std::vector<uint8_t> row(size_t(a.kp));
      for (int64_t p = pb; p < pe; ++p)
        for (int64_t r = 0; r < R; ++r) {
          const int64_t m = start[size_t(p)] + r;
          uint8_t* dst = u + p * a.kp * R + r * 4;
          if (m >= a.m) {
            for (int64_t kq = 0; kq < quads; ++kq) std::memset(dst + kq * R * 4, 128, 4);
            for (int64_t b = 0; b < a.nb; ++b) dp[(p * a.nb + b) * R + r] = dsp[(p * a.nb + b) * R + r] = 0.0f;
            continue;
          }
          const int16_t* src = a.q + m * a.kp;
          for (int64_t k = 0; k < a.kp; ++k) row[size_t(k)] = uint8_t(src[k] + 128);
          for (int64_t kq = 0; kq < quads; ++kq) std::memcpy(dst + kq * R * 4, row.data() + kq * 4, 4);
          for (int64_t b = 0; b < a.nb; ++b) {
            dp[(p * a.nb + b) * R + r] = a.d[m * a.nb + b];
            dsp[(p * a.nb + b) * R + r] = a.ds[m * a.nb + b];
          }
        }
    });
    a.u8 = u;
    a.d8 = dp;
    a.ds8 = dsp;
    a.panel_of_row = of_row;
  }
};

// Calls the level's per-thread begin/end around one worker's tiles.
struct LevelScope {
  const Int8DotIsa& isa;
  LevelScope(const Int8DotIsa& l, const Decoder& dec) : isa(l) {
    if (isa.begin) isa.begin(dec.sub, dec.values);
  }
  ~LevelScope() {
    if (isa.end) isa.end();
  }
  LevelScope(const LevelScope&) = delete;
  LevelScope& operator=(const LevelScope&) = delete;
};

}  // namespace

void int8_dot_gemm(const Int8DotIsa& isa, const WeightRef& w, int64_t row0, int64_t n, const float* x, int64_t M,
                   float* out, int64_t ld_out, ThreadPool& pool) {
  if (n <= 0 || M <= 0) return;
  const Decoder dec(*w.quant);
  const QuantizedRows xq(isa, dec.bytes(isa), x, M, w.quant->cols, {{0, M}}, pool);
  const int64_t tiles = (n + kI8TileRows - 1) / kI8TileRows;
  pool.parallel_for(tiles, 1, [&](int64_t tb, int64_t te) {
    TileBuffers b(w.quant->cols);
    const LevelScope scope(isa, dec);
    for (int64_t t = tb; t < te; ++t) {
      const int64_t j0 = t * kI8TileRows;
      run_tile(isa, dec, xq.a, row0, j0, int(std::min<int64_t>(kI8TileRows, n - j0)), 0, M, b, out, ld_out);
    }
  });
}

void int8_dot_grouped_gemm(const Int8DotIsa& isa, const WeightRef& w, const std::vector<Int8Group>& groups, int64_t n,
                           const float* x, int64_t M, float* out, int64_t ld_out, ThreadPool& pool) {
  if (n <= 0 || M <= 0 || groups.empty()) return;
  const Decoder dec(*w.quant);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const Int8Group& g : groups) ranges.emplace_back(g.m0, g.m1);
  const QuantizedRows xq(isa, dec.bytes(isa), x, M, w.quant->cols, ranges, pool);
  const int64_t tiles = (n + kI8TileRows - 1) / kI8TileRows, tasks = int64_t(groups.size()) * tiles;
  // Groups have different row counts: tasks are taken dynamically.
  std::atomic<int64_t> next{0};
  pool.parallel_for(pool.size(), 1, [&](int64_t, int64_t) {
    TileBuffers b(w.quant->cols);
    const LevelScope scope(isa, dec);
    for (int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) {
      const Int8Group& g = groups[size_t(t / tiles)];
      const int64_t j0 = (t % tiles) * kI8TileRows;
      if (g.m1 > g.m0)
        run_tile(isa, dec, xq.a, g.row0, j0, int(std::min<int64_t>(kI8TileRows, n - j0)), g.m0, g.m1, b,
                 out + g.m0 * ld_out, ld_out);
    }
  });
}

}  // namespace dgemma::cpu
