#pragma once
// Which ggml type each tensor of a GGUF file gets for a llama.cpp file type
// ("Q4_K_M", "Q8_0", …), chosen the way llama.cpp's quantizer chooses it, so
// that dgemma's Q4_K_M and Q8_0 files have the types of the published
// DiffusionGemma files (docs/formats.md §5.3, §5.5).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_types.h"

namespace dgemma::quant {

// llama.cpp's file types (the value of general.file_type).
enum class GgufFtype : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
};

struct GgufFtypeInfo {
  GgufFtype ftype;
  std::string_view name;  // lower case, as `--format` takes it: "q4_k_m"
  GgmlType default_type;  // the type of the tensors no rule singles out
};
inline constexpr GgufFtypeInfo kGgufFtypes[] = {
    {GgufFtype::kF32, "f32", GgmlType::kF32},          {GgufFtype::kF16, "f16", GgmlType::kF16},
    {GgufFtype::kBF16, "bf16", GgmlType::kBF16},       {GgufFtype::kQ8_0, "q8_0", GgmlType::kQ8_0},
    {GgufFtype::kQ6_K, "q6_k", GgmlType::kQ6_K},       {GgufFtype::kQ5_K_M, "q5_k_m", GgmlType::kQ5_K},
    {GgufFtype::kQ5_K_S, "q5_k_s", GgmlType::kQ5_K},   {GgufFtype::kQ5_0, "q5_0", GgmlType::kQ5_0},
    {GgufFtype::kQ5_1, "q5_1", GgmlType::kQ5_1},       {GgufFtype::kQ4_K_M, "q4_k_m", GgmlType::kQ4_K},
    {GgufFtype::kQ4_K_S, "q4_k_s", GgmlType::kQ4_K},   {GgufFtype::kQ4_0, "q4_0", GgmlType::kQ4_0},
    {GgufFtype::kQ4_1, "q4_1", GgmlType::kQ4_1},       {GgufFtype::kIQ4_NL, "iq4_nl", GgmlType::kIQ4_NL},
    {GgufFtype::kIQ4_XS, "iq4_xs", GgmlType::kIQ4_XS}, {GgufFtype::kQ3_K_L, "q3_k_l", GgmlType::kQ3_K},
    {GgufFtype::kQ3_K_M, "q3_k_m", GgmlType::kQ3_K},   {GgufFtype::kQ3_K_S, "q3_k_s", GgmlType::kQ3_K},
    {GgufFtype::kQ2_K, "q2_k", GgmlType::kQ2_K},
};

const GgufFtypeInfo& gguf_ftype_info(GgufFtype f);
// A file type by name, case-insensitive ("Q4_K_M"); nullopt for others.
std::optional<GgufFtype> gguf_ftype_from_name(std::string_view name);
// "f32, f16, bf16, q8_0, …" for messages and help.
std::string gguf_ftype_names();

// A tensor as the rules see it: its GGUF name and dimensions, ne[0] (the
// row length) first.
struct GgufTypeTensor {
  std::string name;
  std::vector<int64_t> ne;
};
// What the rules read of the model.
struct GgufTypeModel {
  int n_layer = 0;   // block_count
  int n_expert = 0;  // expert_count (0 or 1: dense)
  int n_gqa = 1;     // attention heads per KV head of layer 0
};

// The type of every tensor, in the order given — the file's order, which
// the attn_v counter follows (docs/formats.md §5.5): 1-D tensors, norms and
// the router (ffn_gate_inp.weight) stay F32; the other tensors take the
// file type's default type unless a rule of the file type picks another
// (token_embd as the tied output, attn_v, ffn_down, attn_output); a K-quant
// or IQ4_XS whose row length is not a multiple of 256 falls back to a
// 32-element type (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K/IQ4_XS →
// IQ4_NL), and to F16 when the row is not a multiple of 32 either. Throws
// Error naming the tensor when no type fits its rows.
std::vector<GgmlType> gguf_tensor_types(GgufFtype ftype, const std::vector<GgufTypeTensor>& tensors,
                                        const GgufTypeModel& model);

}  // namespace dgemma::quant
