// bitsandbytes NF4 (+ double quant) tensors (docs/formats.md §2). Used in
// place from the mapped file: codes and absmax are read where they lie; only
// the two code books (16 and 256 floats) are copied into the weight.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "dgemma/error.h"
#include "quantize/format_tables.h"
#include "quantize/readers.h"

namespace dgemma::quant {
namespace {

constexpr const char* kStatePrefix = ".quant_state.bitsandbytes__";

// QuantState.from_dict's valid_qs_keys (docs/formats.md §2.1): the non-tensor
// fields that may appear in the JSON blob.
bool known_state_key(const std::string& k) {
  static const char* kKeys[] = {"quant_type",       "blocksize",     "dtype",  "shape",     "nested_blocksize",
                                "nested_dtype",     "nested_offset", "absmax", "quant_map", "nested_absmax",
                                "nested_quant_map", "quant_state"};
  return std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* s) { return k == s; }) != std::end(kKeys);
}

bool allowed_blocksize(int64_t b) {
  for (int64_t a : {32, 64, 128, 256, 512, 1024, 2048, 4096})
    if (a == b) return true;
  return false;
}

void expect_dtype(const TensorView& v, DType want, const char* role) {
  if (v.dtype() != want)
    throw Error(where(v) + ": " + role + " must be " + std::string(dtype_name(want)) + ", got " +
                std::string(dtype_name(v.dtype())) + " (docs/formats.md §2.1)");
}

void expect_numel(const TensorView& v, int64_t want, const char* role) {
  if (v.numel() != want)
    throw Error(where(v) + ": " + role + " has " + std::to_string(v.numel()) + " elements, expected " +
                std::to_string(want) + " (docs/formats.md §2.4)");
}

}  // namespace

std::shared_ptr<QuantizedWeight> read_bnb_nf4(const QuantContext& ctx, const ExpectedTensor& ex,
                                              const std::string& name) {
  const TensorStore& store = *ctx.store;
  // Exactly one quant_state.bitsandbytes__<type> key (docs/formats.md §2.1).
  const std::string prefix = name + kStatePrefix;
  const TensorView* state = nullptr;
  const auto& names = store.names();
  for (auto it = std::lower_bound(names.begin(), names.end(), prefix); it != names.end() && it->rfind(prefix, 0) == 0;
       ++it) {
    const std::string type = it->substr(prefix.size());
    if (type != "nf4")
      throw Error(std::string(store.find(*it)->file) + ": tensor " + *it + ": bitsandbytes quant type \"" + type +
                  "\" is not supported (only nf4, docs/formats.md §2)");
    state = store.find(*it);
  }
  if (!state) return nullptr;

  // The JSON blob of non-tensor fields.
  const std::string state_where = where(*state);
  std::string text(reinterpret_cast<const char*>(state->data), size_t(state->nbytes()));
  json::ParseOptions po;
  po.source = state_where;
  const json::Value js = json::parse(text, po);
  if (!js.is_object()) throw Error(state_where + ": quant state must be a JSON object");
  for (const auto& [key, value] : js.as_object())
    if (!known_state_key(key)) throw Error(state_where + ": unknown quant state field \"" + key + "\"");
  auto field = [&](const char* key) -> const json::Value& {
    const json::Value* v = js.find(key);
    if (!v || v->is_null()) throw Error(state_where + ": quant state field \"" + std::string(key) + "\" is missing");
    return *v;
  };
  const std::string quant_type = field("quant_type").as_string(state_where + ": quant_type");
  if (quant_type != "nf4")
    throw Error(state_where + ": quant_type \"" + quant_type + "\" is not supported (only nf4, docs/formats.md §2)");
  const int64_t blocksize = field("blocksize").as_int(state_where + ": blocksize");
  if (!allowed_blocksize(blocksize))
    throw Error(state_where + ": blocksize " + std::to_string(blocksize) +
                " is not one of 32, 64, ..., 4096 (docs/formats.md §2.4)");
  const std::string dtype_text = field("dtype").as_string(state_where + ": dtype");
  const std::optional<DType> dtype = torch_dtype_from_name(dtype_text);
  if (!dtype) throw Error(state_where + ": dtype \"" + dtype_text + "\" is not a float dtype this engine reads");
  std::vector<int64_t> shape;
  for (const json::Value& d : field("shape").as_array(state_where + ": shape"))
    shape.push_back(d.as_int(state_where + ": shape[]"));
  if (shape != ex.shape)
    throw Error(state_where + ": shape " + shape_string(shape) + " does not match the expected " + ex.name + " " +
                shape_string(ex.shape));
  const bool nested = js.find("nested_offset") != nullptr || js.find("nested_blocksize") != nullptr;

  auto q = std::make_shared<QuantizedWeight>();
  q->scheme = QuantScheme::kNF4;
  q->shape = ex.shape;
  q->dtype = *dtype;
  q->block = int(blocksize);
  q->bits = 4;
  set_logical_shape(*q, ex.shape);
  const int64_t n = product(ex.shape), blocks = (n + blocksize - 1) / blocksize;

  // Packed codes: any storage dtype (bnb_4bit_quant_storage), read as bytes.
  const TensorView& w = require(ctx, name, state_where);
  if (int64_t(w.nbytes()) != (n + 1) / 2)
    throw Error(where(w) + ": packed NF4 data has " + std::to_string(w.nbytes()) + " bytes, expected ceil(" +
                std::to_string(n) + " / 2) = " + std::to_string((n + 1) / 2) + " (docs/formats.md §2.2)");
  add_stored(*q, w);

  const TensorView& qmap = require(ctx, name + ".quant_map", state_where);
  expect_dtype(qmap, DType::kF32, "quant_map");
  expect_numel(qmap, 16, "quant_map");
  for (int c = 0; c < 16; ++c) {
    q->code_map[c] = qmap.at_f32(size_t(c));
    if (!(std::fabs(q->code_map[c] - quant::kNf4Values[c]) <= 1e-6f))
      throw Error(where(qmap) + ": entry " + std::to_string(c) + " is " + std::to_string(q->code_map[c]) +
                  ", not the NF4 value " + std::to_string(quant::kNf4Values[c]) + " (docs/formats.md §2.2)");
  }
  add_stored(*q, qmap);

  const TensorView& absmax = require(ctx, name + ".absmax", state_where);
  expect_numel(absmax, blocks, "absmax");
  QuantSlice slice;
  slice.row_begin = 0;
  slice.rows = q->rows;
  slice.codes = w.data;
  slice.scales = absmax.data;
  if (nested) {
    // docs/formats.md §2.3-§2.4: absmax holds 8-bit codes of (A - offset).
    expect_dtype(absmax, DType::kU8, "absmax (double quant)");
    const int64_t nb = field("nested_blocksize").as_int(state_where + ": nested_blocksize");
    if (!allowed_blocksize(nb) && nb != 16)
      throw Error(state_where + ": nested_blocksize " + std::to_string(nb) + " is not a valid block size");
    const std::string nd = field("nested_dtype").as_string(state_where + ": nested_dtype");
    if (torch_dtype_from_name(nd) != DType::kF32)
      throw Error(state_where + ": nested_dtype \"" + nd + "\" is not supported (float32, docs/formats.md §2.3)");
    const double offset = field("nested_offset").as_double(state_where + ": nested_offset");
    if (!std::isfinite(offset)) throw Error(state_where + ": nested_offset is not finite");
    const TensorView& nabs = require(ctx, name + ".nested_absmax", state_where);
    expect_dtype(nabs, DType::kF32, "nested_absmax");
    expect_numel(nabs, (blocks + nb - 1) / nb, "nested_absmax");
    const TensorView& nmap = require(ctx, name + ".nested_quant_map", state_where);
    expect_dtype(nmap, DType::kF32, "nested_quant_map");
    expect_numel(nmap, 256, "nested_quant_map");
    for (int c = 0; c < 256; ++c) q->nested_map[c] = nmap.at_f32(size_t(c));
    q->double_quant = true;
    q->nested_block = int(nb);
    q->nested_scales = nabs.data;
    q->nested_offset = float(offset);
    q->scale_dtype = DType::kU8;
    add_stored(*q, nabs);
    add_stored(*q, nmap);
    q->describe = "bitsandbytes nf4 (double quant)";
  } else {
    expect_dtype(absmax, DType::kF32, "absmax");
    for (const char* k : {".nested_absmax", ".nested_quant_map"})
      if (store.find(name + k))
        throw Error(state_where + ": tensor " + name + k + " is present but the quant state has no nested_* fields");
    q->scale_dtype = DType::kF32;
    q->describe = "bitsandbytes nf4";
  }
  add_stored(*q, absmax);
  add_stored(*q, *state);
  q->slices.push_back(slice);
  return q;
}

}  // namespace dgemma::quant
