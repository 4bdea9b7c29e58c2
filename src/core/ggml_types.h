#pragma once
// The ggml tensor types a GGUF file may hold (docs/formats.md §5.2): ids as
// the file stores them, block sizes, and which ones dgemma reads. Core holds
// the table because the GGUF reader (io), the block decoders and quantizers
// (quantize) and the CPU kernels (backend_cpu) all need it.
#include <cstdint>
#include <optional>
#include <string_view>

namespace dgemma {

// The ids of ggml's type enum (stable: files store them). Only the types a
// DiffusionGemma GGUF may hold are named; other ids are refused by the reader.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // ggml's spelling: "q4_K", "f32"
  int block_elems;        // elements per block (1 for plain types)
  int block_bytes;        // bytes per block
  // Whether values are integer levels times exact fp32 block scales (and an
  // optional per-sub-block offset), so products with int8 activations are
  // exact integer sums (docs/formats.md §5.2).
  bool integer_levels;
  // Elements per scale of the integer path (32 or 16); 0 for plain types.
  int sub_block;
  // Whether each sub-block carries an additive offset (Q4_1, Q5_1, Q2_K,
  // Q4_K, Q5_K: value = scale·q + offset).
  bool has_offset;
};

// The supported types, in id order.
inline constexpr GgmlTypeTraits kGgmlTypes[] = {
    {GgmlType::kF32, "f32", 1, 4, false, 0, false},         {GgmlType::kF16, "f16", 1, 2, false, 0, false},
    {GgmlType::kQ4_0, "q4_0", 32, 18, true, 32, false},     {GgmlType::kQ4_1, "q4_1", 32, 20, true, 32, true},
    {GgmlType::kQ5_0, "q5_0", 32, 22, true, 32, false},     {GgmlType::kQ5_1, "q5_1", 32, 24, true, 32, true},
    {GgmlType::kQ8_0, "q8_0", 32, 34, true, 32, false},     {GgmlType::kQ2_K, "q2_K", 256, 84, true, 16, true},
    {GgmlType::kQ3_K, "q3_K", 256, 110, true, 16, false},   {GgmlType::kQ4_K, "q4_K", 256, 144, true, 32, true},
    {GgmlType::kQ5_K, "q5_K", 256, 176, true, 32, true},    {GgmlType::kQ6_K, "q6_K", 256, 210, true, 16, false},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 18, true, 32, false}, {GgmlType::kIQ4_XS, "iq4_xs", 256, 136, true, 32, false},
    {GgmlType::kBF16, "bf16", 1, 2, false, 0, false},
};

// The traits of a supported type; nullptr for any other id.
const GgmlTypeTraits* ggml_type_traits(uint32_t id);
// Traits of a named (hence supported) type.
const GgmlTypeTraits& ggml_traits(GgmlType t);
std::string_view ggml_type_name(GgmlType t);
// ggml's name of any id, "type 99" for ids it never had; for messages.
std::string ggml_type_id_name(uint32_t id);
// A supported type by ggml's name, case-insensitive ("Q4_K", "q8_0").
std::optional<GgmlType> ggml_type_from_name(std::string_view name);
// True for the block types (everything but F32, F16, BF16).
inline bool ggml_is_block(GgmlType t) { return ggml_traits(t).block_elems > 1; }
// Bytes of a row of `elems` elements (a multiple of the block size).
inline uint64_t ggml_row_bytes(GgmlType t, int64_t elems) {
  const GgmlTypeTraits& tr = ggml_traits(t);
  return uint64_t(elems / tr.block_elems) * uint64_t(tr.block_bytes);
}

}  // namespace dgemma
