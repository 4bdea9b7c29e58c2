#include "quantize/quant_context.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <filesystem>

#include "core/file_io.h"
#include "dgemma/error.h"
#include "io/gguf.h"
#include "quantize/format_rows.h"

namespace dgemma {
namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<json::Value> read_json(const std::string& path) {
  if (!is_file(path)) return std::nullopt;
  json::ParseOptions po;
  po.source = path;
  return json::parse(read_text_file(path), po);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A positive integer field, or the default when absent.
int int_field(const json::Value& obj, const char* key, int dflt, const std::string& where) {
  const json::Value* v = obj.find(key);
  if (!v || v->is_null()) return dflt;
  const int64_t x = v->as_int(where + "." + key);
  if (x <= 0 || x > (1 << 20))
    throw Error(where + "." + key + ": expected a positive integer, got " + std::to_string(x));
  return int(x);
}

MlxQuantParams parse_mlx_params(const json::Value& v, const MlxQuantParams& dflt, const std::string& where) {
  MlxQuantParams p = dflt;
  if (v.is_bool()) {  // docs/formats.md §4.3: per-path values may be booleans
    p.quantized = v.as_bool(where);
    return p;
  }
  if (!v.is_object()) throw Error(where + ": expected an object or a boolean, got " + json::kind_name(v.kind()));
  p.group_size = int_field(v, "group_size", dflt.group_size, where);
  p.bits = int_field(v, "bits", dflt.bits, where);
  const json::Value* mode = v.find("mode");
  p.mode = mode && !mode->is_null() ? mode->as_string(where + ".mode") : std::string("affine");
  p.quantized = true;
  return p;
}

void parse_mlx(QuantContext& q, const json::Value& obj, const std::string& where) {
  q.kind = CheckpointQuant::kMlx;
  q.mlx_from_config = true;
  q.mlx_default = parse_mlx_params(obj, MlxQuantParams{}, where);
  for (const auto& [key, value] : obj.as_object(where)) {
    if (key == "group_size" || key == "bits" || key == "mode") continue;
    if (value.is_object() || value.is_bool())
      q.mlx_overrides.emplace_back(key, parse_mlx_params(value, q.mlx_default, where + "." + json::quoted(key)));
  }
}

void parse_modelopt(QuantContext& q, const json::Value* qc, const std::string& qc_where, const json::Value* hf,
                    const std::string& hf_where) {
  q.kind = CheckpointQuant::kModelOpt;
  std::string algo, algo_where;
  auto add_patterns = [&](const json::Value* list, const std::string& where) {
    if (!list || list->is_null()) return;
    for (const json::Value& p : list->as_array(where)) q.exclude_patterns.push_back(p.as_string(where + "[]"));
  };
  if (hf) {
    const json::Value* hq = hf->find("quantization");
    if (!hq || !hq->is_object()) throw Error(hf_where + ": quantization: required object is missing");
    const std::string w = hf_where + ": quantization";
    if (const json::Value* a = hq->find("quant_algo"); a && !a->is_null()) {
      algo = a->as_string(w + ".quant_algo");
      algo_where = w + ".quant_algo";
    }
    q.group_size = int_field(*hq, "group_size", 16, w);
    add_patterns(hq->find("exclude_modules"), w + ".exclude_modules");
    q.source = hf_where;
  }
  if (qc) {
    if (const json::Value* a = qc->find("quant_algo"); a && !a->is_null() && algo.empty()) {
      algo = a->as_string(qc_where + ".quant_algo");
      algo_where = qc_where + ".quant_algo";
    }
    add_patterns(qc->find("ignore"), qc_where + ".ignore");
    if (q.source.empty()) q.source = qc_where;
  }
  // W4A16_NVFP4 is the weight-only variant: the same weight tensors, no
  // activation scales (docs/formats.md §3.4).
  if (!algo.empty() && algo != "NVFP4" && algo != "W4A16_NVFP4" && algo != "MIXED_PRECISION")
    throw Error(algo_where + ": quantization algorithm \"" + algo +
                "\" is not supported (this engine reads ModelOpt NVFP4 and W4A16_NVFP4, docs/formats.md §3)");
  if (q.group_size != 16)
    throw Error(q.source + ": group_size " + std::to_string(q.group_size) + " is not supported (NVFP4 uses 16)");
  q.quant_algo = algo;
}

void parse_hf_config(QuantContext& q, const json::Value& qc, const std::string& where, const json::Value* hf,
                     const std::string& hf_where) {
  const json::Value* m = qc.find("quant_method");
  const std::string method = m && !m->is_null() ? m->as_string(where + ".quant_method") : std::string();
  if (method == "bitsandbytes") {
    auto flag = [&](const char* a, const char* b) {
      for (const char* k : {a, b})
        if (const json::Value* v = qc.find(k); v && v->is_bool() && v->as_bool()) return true;
      return false;
    };
    if (flag("load_in_8bit", "_load_in_8bit"))
      throw Error(where +
                  ".load_in_8bit: bitsandbytes 8-bit (LLM.int8) checkpoints are not supported; "
                  "NF4 (load_in_4bit) is (docs/formats.md §2)");
    if (const json::Value* t = qc.find("bnb_4bit_quant_type"); t && t->is_string() && t->as_string() != "nf4")
      throw Error(where + ".bnb_4bit_quant_type: \"" + t->as_string() +
                  "\" is not supported (only nf4, docs/formats.md §2)");
    q.kind = CheckpointQuant::kBitsAndBytes;
    q.source = where;
  } else if (method == "modelopt") {
    parse_modelopt(q, &qc, where, hf, hf_where);
  } else {
    throw Error(where + ".quant_method: \"" + method +
                "\" is not supported (supported: bitsandbytes NF4, modelopt NVFP4, MLX affine; docs/formats.md §7)");
  }
}

// Without a config entry: names only quantized checkpoints carry.
void sniff_tensor_names(QuantContext& q, const TensorStore& store) {
  for (const std::string& n : store.names()) {
    if (n.find(".quant_state.bitsandbytes__") != std::string::npos) {
      q.kind = CheckpointQuant::kBitsAndBytes;
    } else if (ends_with(n, ".weight_scale_2")) {
      q.kind = CheckpointQuant::kModelOpt;
    } else if (ends_with(n, ".scales") && store.find(n.substr(0, n.size() - 7) + ".biases")) {
      q.kind = CheckpointQuant::kMlx;
      q.mlx_from_config = false;
    } else {
      continue;
    }
    q.source = store.dir() + " (tensor " + n + ")";
    return;
  }
}

}  // namespace

static_assert(rows_in_enum_order(kCheckpointFormats, &CheckpointFormat::kind),
              "kCheckpointFormats: one row per CheckpointQuant, in enum order");

std::string_view checkpoint_quant_name(CheckpointQuant q) { return kCheckpointFormats[size_t(q)].name; }

std::optional<DType> torch_dtype_from_name(std::string_view name) {
  if (name.rfind("torch.", 0) == 0) name.remove_prefix(6);
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16" || name == "half") return DType::kF16;
  if (name == "float32" || name == "float") return DType::kF32;
  return std::nullopt;
}

const MlxQuantParams* QuantContext::mlx_override(const std::string& path) const {
  for (const auto& [key, params] : mlx_overrides)
    if (key == path) return &params;
  for (const auto& [key, params] : mlx_overrides)
    if ((ends_with(path, key) && path.size() > key.size() && path[path.size() - key.size() - 1] == '.') ||
        (ends_with(key, path) && key.size() > path.size() && key[key.size() - path.size() - 1] == '.'))
      return &params;
  return nullptr;
}

const std::string* QuantContext::excluded_by(const std::string& path) const {
  for (const std::string& p : exclude_patterns)
    if (::fnmatch(p.c_str(), path.c_str(), 0) == 0) return &p;
  return nullptr;
}

std::optional<QuantContext> detect_quantization(const TensorStore& store) {
  if (!store.gguf_parts().empty()) {
    QuantContext q;
    q.store = &store;
    q.kind = CheckpointQuant::kGguf;
    q.source = store.gguf_parts().front()->path();
    q.default_dtype = DType::kF32;
    return q;
  }
  const std::filesystem::path dir(store.dir());
  const std::string config_path = (dir / "config.json").string();
  const std::string hf_path = (dir / "hf_quant_config.json").string();
  std::optional<json::Value> config = read_json(config_path);
  std::optional<json::Value> hf = read_json(hf_path);
  return detect_quantization(store, config ? &*config : nullptr, config_path, hf ? &*hf : nullptr, hf_path);
}

std::optional<QuantContext> detect_quantization(const TensorStore& store, const json::Value* config,
                                                const std::string& config_source, const json::Value* hf,
                                                const std::string& hf_source) {
  QuantContext q;
  q.store = &store;
  if (config && config->is_object()) {
    auto declared_dtype = [&]() -> std::optional<DType> {
      for (const json::Value* obj : {config, config->find("text_config")}) {
        if (!obj || !obj->is_object()) continue;
        for (const char* key : {"dtype", "torch_dtype"})
          if (const json::Value* d = obj->find(key); d && d->is_string())
            if (auto t = torch_dtype_from_name(d->as_string())) return t;
      }
      return std::nullopt;
    };
    if (auto t = declared_dtype()) q.default_dtype = *t;
    const json::Value* mlx = config->find("quantization");
    const json::Value* qc = config->find("quantization_config");
    if (mlx && mlx->is_object() && (mlx->find("group_size") || mlx->find("bits"))) {
      parse_mlx(q, *mlx, config_source + ": quantization");
      q.source = config_source;
    } else if (qc && qc->is_object()) {
      parse_hf_config(q, *qc, config_source + ": quantization_config", hf, hf_source);
    }
  }
  if (q.kind == CheckpointQuant::kNone && hf) parse_modelopt(q, nullptr, "", hf, hf_source);
  if (q.kind == CheckpointQuant::kNone) sniff_tensor_names(q, store);
  if (q.kind == CheckpointQuant::kMlx && q.mlx_from_config && q.mlx_default.mode != "affine")
    throw Error(config_source + ": quantization.mode: \"" + q.mlx_default.mode +
                "\" is not supported (MLX affine only; docs/formats.md §4.2)");
  if (q.kind == CheckpointQuant::kNone) return std::nullopt;
  return q;
}

}  // namespace dgemma
