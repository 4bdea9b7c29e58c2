#include "quantize/export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"
#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"
#include "quantize/format_tables.h"
#include "quantize/page_release.h"
#include "quantize/quant_context.h"
#include "quantize/quantizers.h"
#include "quantize/resolve.h"
#include "quantize/stream_writer.h"

namespace dgemma {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kChunkElems = int64_t(1) << 22;  // elements quantized per step (a multiple of every block size)

enum class Action { kCopy, kDrop, kNf4, kNvfp4Experts, kAffine };

struct Item {
  const TensorView* src = nullptr;
  const ExpectedTensor* ex = nullptr;  // null: not a text-model tensor (copied through)
  Action action = Action::kCopy;
  int bits = 4, group = 64;  // kAffine
};

std::string module_of(const std::string& name) {
  return name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? name.substr(0, name.size() - 7) : name;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string torch_dtype_name(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    default:
      return "float32";
  }
}

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

quant::FloatSource source_of(const TensorView& v, int64_t begin = 0, int64_t n = -1) {
  quant::FloatSource s;
  s.dtype = v.dtype();
  s.data = v.data + size_t(begin) * size_t(dtype_bits(v.dtype()) / 8);
  s.numel = n < 0 ? v.numel() - begin : n;
  return s;
}

Action choose(const ExpectedTensor& ex, const TensorView& v, const ExportOptions& o, Item& item) {
  const Component c = ex.component;
  const bool float_dtype = v.dtype() == DType::kBF16 || v.dtype() == DType::kF16 || v.dtype() == DType::kF32;
  if (!float_dtype || ex.shape.size() < 2) return Action::kCopy;
  const bool router_proj = c == Component::kRouter && ends_with(ex.name, "router.proj.weight");
  switch (o.format) {
    case ExportFormat::kNf4:
      if (c == Component::kAttention || c == Component::kDenseMlp || c == Component::kSelfConditioning ||
          c == Component::kExperts || (c == Component::kEmbedding && o.quantize_embeddings) ||
          (router_proj && o.quantize_router))
        return Action::kNf4;
      return Action::kCopy;
    case ExportFormat::kNvfp4Experts:
      if (c == Component::kExperts && ex.shape.size() == 3 && ex.shape[2] % 16 == 0 && ex.shape[1] % 32 == 0)
        return Action::kNvfp4Experts;
      return Action::kCopy;
    case ExportFormat::kMlx4: {
      // mlx-vlm's diffusion_gemma quant_predicate (docs/formats.md §4.4).
      int bits = 0;
      if (c == Component::kAttention || c == Component::kDenseMlp)
        bits = 8;
      else if (c == Component::kExperts || c == Component::kSelfConditioning)
        bits = 4;
      else if (c == Component::kEmbedding && o.quantize_embeddings)
        bits = 8;
      else if (router_proj && o.quantize_router)
        bits = 8;
      const int64_t cols = ex.shape.back();
      const int group = cols % 64 == 0 ? 64 : cols % 32 == 0 ? 32 : 0;
      if (bits == 0 || group == 0) return Action::kCopy;
      item.bits = bits;
      item.group = group;
      return Action::kAffine;
    }
  }
  return Action::kCopy;
}

// The bitsandbytes quant_state JSON (docs/formats.md §2.1), padded with trailing
// spaces to `reserve` bytes when given (its length must be known before the
// nested offset is).
std::string nf4_state_json(const TensorView& v, bool dq, float offset, size_t reserve) {
  json::Value s = json::Object{};
  s.set("quant_type", "nf4");
  s.set("blocksize", 64);
  s.set("dtype", torch_dtype_name(v.dtype()));
  json::Array shape;
  for (int64_t d : v.shape()) shape.emplace_back(d);
  s.set("shape", shape);
  if (dq) {
    s.set("nested_blocksize", 256);
    s.set("nested_dtype", "float32");
    s.set("nested_offset", double(offset));
  }
  std::string text = json::dump(s);
  if (reserve) {
    if (text.size() > reserve) throw Error("internal: NF4 quant state longer than reserved");
    text.append(reserve - text.size(), ' ');
  }
  return text;
}

size_t nf4_state_reserve(const TensorView& v, bool dq) {
  return nf4_state_json(v, dq, -1.2345678901234567e-30f, 0).size() + 16;
}

class Exporter {
 public:
  Exporter(const ExportOptions& o, SafetensorsStreamWriter& w) : o_(o), w_(w) {}

  void declare(const Item& it) {
    const TensorView& v = *it.src;
    const std::string& name = v.name();
    switch (it.action) {
      case Action::kDrop:
        return;
      case Action::kCopy:
        w_.declare(name, v.dtype(), v.shape());
        return;
      case Action::kNf4: {
        const int64_t n = v.numel(), nb = (n + 63) / 64;
        const bool dq = o_.nf4_double_quant;
        w_.declare(name, DType::kU8, {(n + 1) / 2, 1});
        w_.declare(name + ".absmax", dq ? DType::kU8 : DType::kF32, {nb});
        w_.declare(name + ".quant_map", DType::kF32, {16});
        if (dq) {
          w_.declare(name + ".nested_absmax", DType::kF32, {(nb + 255) / 256});
          w_.declare(name + ".nested_quant_map", DType::kF32, {256});
        }
        w_.declare(name + ".quant_state.bitsandbytes__nf4", DType::kU8, {int64_t(nf4_state_reserve(v, dq))});
        return;
      }
      case Action::kNvfp4Experts:
        for_each_expert_linear(it, [&](const std::string& m, int64_t, int64_t rows, int64_t cols) {
          w_.declare(m + ".weight", DType::kU8, {rows, cols / 2});
          w_.declare(m + ".weight_scale", DType::kF8_E4M3, {rows, cols / 16});
          w_.declare(m + ".weight_scale_2", DType::kF32, {});
          w_.declare(m + ".input_scale", DType::kF32, {});
        });
        return;
      case Action::kAffine: {
        const std::string p = module_of(name);
        std::vector<int64_t> ws = v.shape(), ss = v.shape();
        ws.back() = ws.back() * it.bits / 32;
        ss.back() = ss.back() / it.group;
        w_.declare(p + ".weight", DType::kU32, ws);
        w_.declare(p + ".scales", scale_dtype(v), ss);
        w_.declare(p + ".biases", scale_dtype(v), ss);
        return;
      }
    }
  }

  void produce(const Item& it) {
    switch (it.action) {
      case Action::kDrop:
        return;
      case Action::kCopy: {
        // In pieces, handing each piece's input pages back once written.
        const uint64_t n = it.src->nbytes(), piece = uint64_t(64) << 20;
        for (uint64_t at = 0; at < n; at += piece) {
          w_.write(it.src->name(), it.src->data + at, std::min(piece, n - at), at);
          release_mapped_pages(it.src->data + at, std::min(piece, n - at));
        }
        return;
      }
      case Action::kNf4:
        return produce_nf4(*it.src);
      case Action::kNvfp4Experts:
        return produce_nvfp4(it);
      case Action::kAffine:
        return produce_affine(it);
    }
  }

 private:
  static DType scale_dtype(const TensorView& v) { return v.dtype() == DType::kF32 ? DType::kF32 : v.dtype(); }

  // Fused expert tensor -> per-expert linears (docs/formats.md §3.2): fn(module,
  // first source row, rows, cols).
  template <class Fn>
  void for_each_expert_linear(const Item& it, Fn&& fn) {
    const std::string& name = it.src->name();
    const std::string base = name.substr(0, name.rfind('.') + 1);
    const bool gate_up = ends_with(name, "gate_up_proj");
    const int64_t E = it.ex->shape[0], rows = it.ex->shape[1], cols = it.ex->shape[2];
    for (int64_t e = 0; e < E; ++e) {
      const std::string pre = base + std::to_string(e) + ".";
      if (gate_up) {
        fn(pre + "gate_proj", e * rows, rows / 2, cols);
        fn(pre + "up_proj", e * rows + rows / 2, rows / 2, cols);
      } else {
        fn(pre + "down_proj", e * rows, rows, cols);
      }
    }
  }

  void produce_nf4(const TensorView& v) {
    const std::string& name = v.name();
    const int64_t n = v.numel();
    const bool dq = o_.nf4_double_quant;
    std::vector<float> absmax;
    absmax.reserve(size_t((n + 63) / 64));
    for (int64_t i0 = 0; i0 < n; i0 += kChunkElems) {
      const int64_t cnt = std::min(kChunkElems, n - i0);
      quant::Nf4Packed p = quant::quantize_nf4(source_of(v, i0, cnt), 64, false, 256, o_.threads);
      w_.write(name, p.codes.data(), p.codes.size(), uint64_t(i0 / 2));
      absmax.insert(absmax.end(), p.absmax.begin(), p.absmax.end());
      release_mapped_pages(v.data + size_t(i0) * size_t(dtype_bits(v.dtype()) / 8),
                           uint64_t(cnt) * uint64_t(dtype_bits(v.dtype()) / 8));
    }
    quant::Nf4Packed p;
    if (dq) {
      quant::nf4_double_quantize(absmax, 256, p);
      w_.write(name + ".absmax", p.absmax_codes.data(), p.absmax_codes.size());
      w_.write(name + ".nested_absmax", p.nested_absmax.data(), p.nested_absmax.size() * 4);
      w_.write(name + ".nested_quant_map", quant::bnb_dynamic_map(), 256 * 4);
    } else {
      w_.write(name + ".absmax", absmax.data(), absmax.size() * 4);
    }
    w_.write(name + ".quant_map", quant::kNf4Values, 16 * 4);
    const std::string state = nf4_state_json(v, dq, p.nested_offset, nf4_state_reserve(v, dq));
    w_.write(name + ".quant_state.bitsandbytes__nf4", state.data(), state.size());
  }

  void produce_nvfp4(const Item& it) {
    const TensorView& v = *it.src;
    const quant::FloatSource src = source_of(v);
    const bool gate_up = ends_with(v.name(), "gate_up_proj");
    const int64_t rows = it.ex->shape[1], cols = it.ex->shape[2];
    float g = 1.0f;
    for_each_expert_linear(it, [&](const std::string& m, int64_t row0, int64_t r, int64_t c) {
      // Gate and up of an expert share weight_scale_2 (docs/formats.md §3.3).
      if (!gate_up || ends_with(m, "gate_proj"))
        g = quant::nvfp4_global_scale(quant::abs_max(src, row0 * cols, (gate_up ? rows : r) * cols));
      quant::Nvfp4Packed p = quant::quantize_nvfp4(src, row0, r, c, g, o_.threads);
      const float one = 1.0f;
      w_.write(m + ".weight", p.codes.data(), p.codes.size());
      w_.write(m + ".weight_scale", p.scales.data(), p.scales.size());
      w_.write(m + ".weight_scale_2", &p.global_scale, 4);
      w_.write(m + ".input_scale", &one, 4);
      const uint64_t esize = uint64_t(dtype_bits(v.dtype()) / 8);
      release_mapped_pages(v.data + uint64_t(row0 * c) * esize, uint64_t(r * c) * esize);
    });
  }

  void produce_affine(const Item& it) {
    const TensorView& v = *it.src;
    const std::string p = module_of(v.name());
    const int64_t cols = v.shape().back(), rows = v.numel() / cols;
    const int64_t step = std::max<int64_t>(1, kChunkElems / cols);
    const DType sd = scale_dtype(v);
    const uint64_t ssize = sd == DType::kF32 ? 4 : 2;
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
      const int64_t r = std::min(step, rows - r0);
      quant::AffinePacked q =
          quant::quantize_affine(source_of(v, r0 * cols, r * cols), r, cols, it.bits, it.group, sd, o_.threads);
      w_.write(p + ".weight", q.codes.data(), q.codes.size(), uint64_t(r0 * cols * it.bits / 8));
      const uint64_t at = uint64_t(r0 * (cols / it.group)) * ssize;
      w_.write(p + ".scales", q.scales.data(), q.scales.size(), at);
      w_.write(p + ".biases", q.biases.data(), q.biases.size(), at);
      const uint64_t esize = uint64_t(dtype_bits(v.dtype()) / 8);
      release_mapped_pages(v.data + uint64_t(r0 * cols) * esize, uint64_t(r * cols) * esize);
    }
  }

  const ExportOptions& o_;
  SafetensorsStreamWriter& w_;
};

json::Value read_config(const std::string& path) {
  json::ParseOptions po;
  po.source = path;
  json::Value v = json::parse(read_text_file(path), po);
  if (!v.is_object()) throw Error(path + ": top level must be a JSON object");
  return v;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw Error("cannot write " + path);
}

// Copies the input folder's other files (tokenizer, generation config, ...).
void copy_side_files(const std::string& in_dir, const std::string& out_dir) {
  for (const auto& e : fs::directory_iterator(in_dir)) {
    if (!e.is_regular_file()) continue;
    const std::string n = e.path().filename().string();
    if (n.ends_with(".safetensors") || n == "model.safetensors.index.json" || n == "config.json" ||
        n == "hf_quant_config.json")
      continue;
    fs::copy_file(e.path(), fs::path(out_dir) / n, fs::copy_options::overwrite_existing);
  }
}

void prepare_out_dir(const std::string& in_dir, const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw Error("cannot create " + out_dir + ": " + ec.message());
  if (fs::equivalent(in_dir, out_dir, ec)) throw Error("output folder " + out_dir + " is the input folder");
}

// Stored tensor name -> expected tensor; the first stored name of each tie
// group (canonical first) is the one kept.
std::map<std::string, std::pair<const ExpectedTensor*, bool>> map_names(const std::vector<ExpectedTensor>& expected,
                                                                        const TensorStore& store) {
  std::map<std::string, std::pair<const ExpectedTensor*, bool>> m;
  for (const ExpectedTensor& ex : expected) {
    bool kept = false;
    std::vector<std::string> names = {ex.name};
    names.insert(names.end(), ex.aliases.begin(), ex.aliases.end());
    for (const std::string& n : names) {
      if (!store.find(n)) continue;
      m[n] = {&ex, !kept};
      kept = true;
    }
  }
  return m;
}

}  // namespace

std::optional<ExportFormat> parse_export_format(std::string_view name) {
  if (name == "nf4") return ExportFormat::kNf4;
  if (name == "nvfp4-experts") return ExportFormat::kNvfp4Experts;
  if (name == "mlx4") return ExportFormat::kMlx4;
  return std::nullopt;
}

std::string_view export_format_name(ExportFormat f) {
  switch (f) {
    case ExportFormat::kNf4:
      return "nf4";
    case ExportFormat::kNvfp4Experts:
      return "nvfp4-experts";
    case ExportFormat::kMlx4:
      return "mlx4";
  }
  return "?";
}

ExportReport export_quantized(const std::string& in_dir, const std::string& out_dir, const ExportOptions& o) {
  if (o.format == ExportFormat::kNvfp4Experts && (o.quantize_embeddings || o.quantize_router))
    throw Error(
        "nvfp4-experts quantizes the routed experts only (docs/formats.md §3.1); embeddings and router stay BF16");
  const std::string config_path = (fs::path(in_dir) / "config.json").string();
  const ModelConfig config = load_model_config(config_path);
  const TensorStore store = TensorStore::open_dir(in_dir);
  if (auto q = detect_quantization(store))
    throw Error(in_dir + " is already quantized (" + std::string(checkpoint_quant_name(q->kind)) + ", " + q->source +
                "); dgemma quantize needs a BF16/F16/F32 checkpoint");
  prepare_out_dir(in_dir, out_dir);

  const std::vector<ExpectedTensor> expected = expected_tensors(config);
  const auto names = map_names(expected, store);
  std::vector<Item> items;
  ExportReport report;
  for (const std::string& n : store.names()) {
    Item it;
    it.src = store.find(n);
    report.input_bytes += it.src->nbytes();
    if (auto f = names.find(n); f != names.end()) {
      it.ex = f->second.first;
      if (!f->second.second)
        it.action = Action::kDrop;  // tied copy of a kept tensor
      else if (it.src->shape() == it.ex->shape)
        it.action = choose(*it.ex, *it.src, o, it);
    }
    if (it.action == Action::kDrop)
      ++report.dropped;
    else if (it.action == Action::kCopy)
      ++report.copied;
    else
      ++report.quantized;
    items.push_back(it);
  }

  SafetensorsStreamWriter w;
  Exporter ex(o, w);
  for (const Item& it : items) ex.declare(it);
  w.set_metadata("format", o.format == ExportFormat::kMlx4 ? "mlx" : "pt");
  report.out_file = (fs::path(out_dir) / "model.safetensors").string();
  w.begin(report.out_file);
  uint64_t done = 0;
  for (const Item& it : items) {
    ex.produce(it);
    release_mapped_pages(it.src->data, it.src->nbytes());  // keep resident memory at the output's size
    done += it.src->nbytes();
    if (o.progress) o.progress(done, report.input_bytes, it.src->name());
  }
  w.finish();
  report.output_bytes = fs::file_size(report.out_file);

  // Config entries of the format (docs/formats.md §2.1, §3.4, §4.3).
  json::Value cfg = read_config(config_path);
  if (o.format == ExportFormat::kNf4) {
    json::Value q = json::Object{};
    q.set("quant_method", "bitsandbytes");
    q.set("load_in_4bit", true);
    q.set("load_in_8bit", false);
    q.set("_load_in_4bit", true);
    q.set("_load_in_8bit", false);
    q.set("bnb_4bit_quant_type", "nf4");
    q.set("bnb_4bit_use_double_quant", o.nf4_double_quant);
    q.set("bnb_4bit_compute_dtype", "bfloat16");
    q.set("bnb_4bit_quant_storage", "uint8");
    json::Array skip = {json::Value("lm_head"), json::Value("vision_tower"), json::Value("embed_vision")};
    if (!o.quantize_embeddings) skip.emplace_back("embed_tokens");
    if (!o.quantize_router) skip.emplace_back("router");
    q.set("llm_int8_skip_modules", skip);
    q.set("llm_int8_threshold", 6.0);
    q.set("llm_int8_has_fp16_weight", false);
    q.set("llm_int8_enable_fp32_cpu_offload", false);
    cfg.set("quantization_config", q);
  } else if (o.format == ExportFormat::kNvfp4Experts) {
    json::Array exclude = {json::Value("lm_head"), json::Value("*embed_tokens*"), json::Value("*self_attn*"),
                           json::Value("*mlp*"),   json::Value("*router*"),       json::Value("*self_conditioning*"),
                           json::Value("*vision*")};
    json::Value producer = json::Object{};
    producer.set("name", "modelopt");
    producer.set("version", "dgemma-ptq (round to nearest, no calibration)");
    json::Value hq = json::Object{};
    hq.set("quant_algo", "NVFP4");
    hq.set("kv_cache_quant_algo", nullptr);
    hq.set("group_size", 16);
    hq.set("exclude_modules", exclude);
    json::Value hf = json::Object{};
    hf.set("producer", producer);
    hf.set("quantization", hq);
    write_text((fs::path(out_dir) / "hf_quant_config.json").string(), json::dump(hf, 4) + "\n");
    json::Value scheme = json::Object{};
    scheme.set("dynamic", false);
    scheme.set("num_bits", 4);
    scheme.set("type", "float");
    scheme.set("group_size", 16);
    json::Value group = json::Object{};
    group.set("input_activations", scheme);
    group.set("weights", scheme);
    group.set("targets", json::Array{json::Value("Linear")});
    json::Value groups = json::Object{};
    groups.set("group_0", group);
    json::Value q = json::Object{};
    q.set("config_groups", groups);
    q.set("ignore", exclude);
    q.set("quant_algo", "NVFP4");
    q.set("producer", producer);
    q.set("quant_method", "modelopt");
    cfg.set("quantization_config", q);
  } else {
    json::Value q = json::Object{};
    q.set("group_size", 64);
    q.set("bits", 4);
    q.set("mode", "affine");
    for (const Item& it : items) {
      if (it.action != Action::kAffine || (it.bits == 4 && it.group == 64)) continue;
      json::Value p = json::Object{};
      p.set("group_size", it.group);
      p.set("bits", it.bits);
      q.set(module_of(it.src->name()), p);
    }
    cfg.set("quantization", q);
    cfg.set("quantization_config", q);
  }
  write_text((fs::path(out_dir) / "config.json").string(), json::dump(cfg, 2) + "\n");
  copy_side_files(in_dir, out_dir);
  return report;
}

void export_dequantized(const std::string& in_dir, const std::string& out_dir) {
  const std::string config_path = (fs::path(in_dir) / "config.json").string();
  const ModelConfig config = load_model_config(config_path);
  const TensorStore store = TensorStore::open_dir(in_dir);
  const std::optional<QuantContext> ctx = detect_quantization(store);
  prepare_out_dir(in_dir, out_dir);

  struct Out {
    const ExpectedTensor* ex;
    WeightRef ref;
  };
  const std::vector<ExpectedTensor> expected = expected_tensors(config);
  std::vector<Out> outs;
  for (const ExpectedTensor& ex : expected) {
    std::optional<WeightRef> r = ctx ? resolve_quantized(*ctx, ex) : std::nullopt;
    if (!r) {
      std::vector<std::string> names = {ex.name};
      names.insert(names.end(), ex.aliases.begin(), ex.aliases.end());
      for (const std::string& n : names)
        if (const TensorView* v = store.find(n)) {
          r = WeightRef{};
          r->name = ex.name;
          r->dtype = v->dtype();
          r->shape = v->shape();
          r->data = v->data;
          break;
        }
    }
    if (!r) throw Error(in_dir + ": tensor " + ex.name + " is missing");
    outs.push_back({&ex, *r});
  }
  SafetensorsStreamWriter w;
  for (const Out& o : outs) w.declare(o.ex->name, DType::kF32, o.ex->shape);
  w.set_metadata("format", "pt");
  w.begin((fs::path(out_dir) / "model.safetensors").string());
  for (const Out& o : outs) {
    const int64_t cols = o.ex->shape.empty() ? 1 : o.ex->shape.back(), rows = product(o.ex->shape) / cols;
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      if (o.ref.quant)
        dequantize_reference(*o.ref.quant, r, 0, cols, row.data());
      else
        for (int64_t c = 0; c < cols; ++c) row[size_t(c)] = load_as_f32(o.ref.dtype, o.ref.data, size_t(r * cols + c));
      w.write(o.ex->name, row.data(), uint64_t(cols) * 4, uint64_t(r * cols) * 4);
    }
  }
  w.finish();
  json::Value cfg = read_config(config_path);
  json::Object kept;
  for (auto& [k, v] : cfg.as_object())
    if (k != "quantization" && k != "quantization_config") kept.emplace_back(k, v);
  write_text((fs::path(out_dir) / "config.json").string(), json::dump(json::Value(kept), 2) + "\n");
  copy_side_files(in_dir, out_dir);
}

}  // namespace dgemma
