#pragma once
// What the AMX kernels (kernels_amx.cc: bf16 products; int8_dot_amx.cc:
// int8 products) share: the tile configuration record and the compiler
// barrier around every hand-over between C++ and the tiles.
#include <cstdint>

namespace dgemma::cpu::amx_tiles {

// The compilers' tile intrinsics are inline assembly that does not tell the
// optimizer which memory a tile load reads or a tile store writes: without a
// barrier, stores into a buffer a tile then loads may be dropped as dead, and
// reads of a buffer a tile stored into may see older values (seen as NaN in
// a tail path). Every hand-over between C++ and the tiles goes through one.
inline void memory_barrier() { __asm__ __volatile__("" ::: "memory"); }

// The operand of LDTILECFG, palette 1: per tile its bytes per row (colsb)
// and its rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace dgemma::cpu::amx_tiles
