#include "quantize/gguf_type_rules.h"

#include <cctype>

#include "dgemma/error.h"

namespace dgemma::quant {
namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Dimensions without trailing 1s (a [1] scalar is 1-D, [2816, 1] too).
int effective_dims(const std::vector<int64_t>& ne) {
  int n = int(ne.size());
  while (n > 1 && ne[size_t(n - 1)] == 1) --n;
  return n;
}

// Whether a tensor is quantized at all: a 2-D or larger ".weight" that is
// neither a norm nor the MoE router.
bool quantizable(const GgufTypeTensor& t) {
  return ends_with(t.name, "weight") && effective_dims(t.ne) >= 2 && !contains(t.name, "_norm.weight") &&
         !contains(t.name, "ffn_gate_inp.weight");
}

// Layers at the ends and every third one in between get more bits.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of "blk.N.…".
int layer_of(const std::string& name, int n_layer) {
  int layer = -1;
  if (name.rfind("blk.", 0) == 0) {
    size_t i = 4;
    int v = 0;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && v < 1000000)
      v = v * 10 + (name[i++] - '0');
    if (i > 4 && i < name.size() && name[i] == '.') layer = v;
  }
  if (layer < 0 || layer >= n_layer)
    throw Error("GGUF tensor " + name + ": no layer in [0, " + std::to_string(n_layer) + ") in its name");
  return layer;
}

// The 32-element type a K-quant (or IQ4_XS) falls back to for rows that are
// not a multiple of 256.
GgmlType fallback_of(GgmlType t, const std::string& name, int64_t row) {
  switch (t) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kIQ4_XS: return GgmlType::kIQ4_NL;
    case GgmlType::kQ4_K: return GgmlType::kQ5_0;
    case GgmlType::kQ5_K: return GgmlType::kQ5_1;
    case GgmlType::kQ6_K: return GgmlType::kQ8_0;
    default: break;
  }
  throw Error("GGUF tensor " + name + ": rows of " + std::to_string(row) + " elements are not whole " +
              std::string(ggml_type_name(t)) + " blocks of " + std::to_string(ggml_traits(t).block_elems));
}

using F = GgufFtype;

struct Counters {
  int n_attention_wv = 0, i_attention_wv = 0, i_ffn_down = 0;
  bool has_output = false;
};

// The rule-picked type of a quantized tensor (before the row-length
// fallback), for a block-type default.
GgmlType rule_type(F f, GgmlType type, const GgufTypeTensor& t, const GgufTypeModel& m, Counters& c) {
  const std::string& name = t.name;
  if (name == "output.weight" || (!c.has_output && name == "token_embd.weight")) {
    // The output projection (or the token embedding standing in for it).
    if (t.ne[0] % ggml_traits(type).block_elems != 0) return GgmlType::kQ8_0;
    return type == GgmlType::kQ8_0 ? type : GgmlType::kQ6_K;
  }
  if (name == "token_embd.weight") return type;
  if (contains(name, "attn_v.weight")) {
    const int i = c.i_attention_wv++;
    if (f == F::kQ2_K)
      type = m.n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    else if (f == F::kQ3_K_M)
      type = i < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    else if (f == F::kQ3_K_L)
      type = GgmlType::kQ5_K;
    else if ((f == F::kIQ4_NL || f == F::kIQ4_XS) && m.n_gqa >= 4)
      type = GgmlType::kQ5_K;
    else if ((f == F::kQ4_K_M || f == F::kQ5_K_M) && use_more_bits(i, c.n_attention_wv))
      type = GgmlType::kQ6_K;
    else if (f == F::kQ4_K_S && i < 4)
      type = GgmlType::kQ5_K;
    if (m.n_expert == 8) type = GgmlType::kQ8_0;
    return type;
  }
  if (contains(name, "attn_k.weight")) return m.n_expert == 8 ? GgmlType::kQ8_0 : type;
  if (contains(name, "attn_q.weight")) return type;
  if (contains(name, "ffn_down")) {
    // The layer: from the name with experts (their tensors need not come in
    // layer order), else the count of ffn_down tensors so far.
    const int i = m.n_expert > 1 ? layer_of(name, m.n_layer) : c.i_ffn_down;
    const int n = m.n_layer;
    ++c.i_ffn_down;
    if (f == F::kQ2_K) return GgmlType::kQ3_K;
    if (f == F::kQ3_K_M) return i < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    if (f == F::kQ3_K_L) return GgmlType::kQ5_K;
    if (f == F::kQ4_K_M) return use_more_bits(i, n) ? GgmlType::kQ6_K : type;
    if (i < n / 8 && (f == F::kIQ4_NL || f == F::kIQ4_XS)) return GgmlType::kQ5_K;
    if (f == F::kQ5_K_M && use_more_bits(i, n)) return GgmlType::kQ6_K;
    if (f == F::kQ4_K_S && i < n / 8) return GgmlType::kQ5_K;
    return type;
  }
  if (contains(name, "attn_output.weight")) {
    if (m.n_expert == 8) {
      const bool bump = f == F::kQ2_K || f == F::kQ3_K_S || f == F::kQ3_K_M || f == F::kIQ4_NL || f == F::kQ4_K_S ||
                        f == F::kQ4_K_M || f == F::kIQ4_XS;
      return bump ? GgmlType::kQ5_K : type;
    }
    if (f == F::kQ2_K) return GgmlType::kQ3_K;
    if (f == F::kQ3_K_M) return GgmlType::kQ4_K;
    if (f == F::kQ3_K_L) return GgmlType::kQ5_K;
  }
  return type;
}

}  // namespace

const GgufFtypeInfo& gguf_ftype_info(GgufFtype f) {
  for (const GgufFtypeInfo& i : kGgufFtypes)
    if (i.ftype == f) return i;
  throw Error("GGUF file type " + std::to_string(uint32_t(f)) + " is not supported");
}

std::optional<GgufFtype> gguf_ftype_from_name(std::string_view name) {
  for (const GgufFtypeInfo& i : kGgufFtypes) {
    if (i.name.size() != name.size()) continue;
    bool same = true;
    for (size_t k = 0; k < name.size() && same; ++k)
      same = std::tolower(static_cast<unsigned char>(name[k])) == i.name[k];
    if (same) return i.ftype;
  }
  return std::nullopt;
}

std::string gguf_ftype_names() {
  std::string s;
  for (const GgufFtypeInfo& i : kGgufFtypes) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

std::vector<GgmlType> gguf_tensor_types(GgufFtype ftype, const std::vector<GgufTypeTensor>& tensors,
                                        const GgufTypeModel& model) {
  const GgmlType def = gguf_ftype_info(ftype).default_type;
  Counters c;
  for (const GgufTypeTensor& t : tensors) {
    if (t.ne.empty()) throw Error("GGUF tensor " + t.name + " has no dimensions");
    if (contains(t.name, "attn_v.weight")) ++c.n_attention_wv;
    if (t.name == "output.weight") c.has_output = true;
  }
  std::vector<GgmlType> out;
  out.reserve(tensors.size());
  for (const GgufTypeTensor& t : tensors) {
    if (!quantizable(t)) {
      out.push_back(GgmlType::kF32);
      continue;
    }
    if (!ggml_is_block(def)) {  // F32, F16, BF16 files: no rules
      out.push_back(def);
      continue;
    }
    GgmlType type = rule_type(ftype, def, t, model, c);
    const int64_t row = t.ne[0];
    if (row % ggml_traits(type).block_elems != 0) {
      type = fallback_of(type, t.name, row);
      if (row % ggml_traits(type).block_elems != 0) type = GgmlType::kF16;
    }
    out.push_back(type);
  }
  return out;
}

}  // namespace dgemma::quant
