#include "quantize/export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/file_io.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "io/safetensors.h"
#include "checkpoint/checkpoint_source.h"
#include "checkpoint/config.h"
#include "checkpoint/tensor_names.h"
#include "quantize/export_format.h"
#include "quantize/format_rows.h"
#include "quantize/format_tables.h"
#include "quantize/page_release.h"
#include "quantize/quant_context.h"
#include "quantize/quantizers.h"
#include "quantize/resolve.h"
#include "quantize/stream_writer.h"

namespace dgemma {
namespace quant {

std::string module_of(const std::string& name) {
  return name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? name.substr(0, name.size() - 7) : name;
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

quant::FloatSource source_of(const TensorView& v, int64_t begin, int64_t n) {
  quant::FloatSource s;
  s.dtype = v.dtype();
  s.data = v.data + size_t(begin) * size_t(dtype_bits(v.dtype()) / 8);
  s.numel = n < 0 ? v.numel() - begin : n;
  return s;
}

}  // namespace quant

namespace {

namespace fs = std::filesystem;
using namespace quant;

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Only float weights of two or more dimensions are quantized; the rest is
// copied as stored.
bool is_float_matrix(const ExpectedTensor& ex, const TensorView& v) {
  const bool float_dtype = v.dtype() == DType::kBF16 || v.dtype() == DType::kF16 || v.dtype() == DType::kF32;
  return float_dtype && ex.shape.size() >= 2;
}

std::unique_ptr<FormatWriter> make_writer(const ExportOptions& o) {
  switch (o.format) {
    case ExportFormat::kNf4: return make_nf4_writer(o);
    case ExportFormat::kNvfp4Experts: return make_nvfp4_experts_writer(o);
    case ExportFormat::kMlx4: return make_mlx_writer(o);
  }
  throw Error("unknown export format");
}

// A plain tensor copied through in pieces, handing each piece's input pages
// back once written.
void copy_through(const TensorView& v, SafetensorsStreamWriter& w) {
  const uint64_t n = v.nbytes(), piece = uint64_t(64) << 20;
  for (uint64_t at = 0; at < n; at += piece) {
    w.write(v.name(), v.data + at, std::min(piece, n - at), at);
    release_mapped_pages(v.data + at, std::min(piece, n - at));
  }
}

json::Value read_config(const std::string& path) {
  json::ParseOptions po;
  po.source = path;
  json::Value v = json::parse(read_text_file(path), po);
  if (!v.is_object()) throw Error(path + ": top level must be a JSON object");
  return v;
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

static_assert(rows_in_enum_order(kExportFormats, &ExportFormatInfo::format),
              "kExportFormats: one row per ExportFormat, in enum order");

const ExportFormatInfo& export_format_info(ExportFormat f) { return kExportFormats[size_t(f)]; }

std::optional<ExportFormat> parse_export_format(std::string_view name) {
  for (const ExportFormatInfo& f : kExportFormats)
    if (f.name == name) return f.format;
  return std::nullopt;
}

std::string_view export_format_name(ExportFormat f) { return export_format_info(f).name; }

std::string export_format_names() { return name_list(kExportFormats); }

void check_export_input(const std::string& in_dir, const ExportOptions& o) {
  if (o.format == ExportFormat::kNvfp4Experts && (o.quantize_embeddings || o.quantize_router))
    throw Error(
        "nvfp4-experts quantizes the routed experts only (docs/formats.md §3.1); embeddings and router stay BF16");
  const CheckpointSource src = open_checkpoint(in_dir);
  if (auto q = detect_quantization(src.store))
    throw Error(in_dir + " is already quantized (" + std::string(checkpoint_quant_name(q->kind)) + ", " + q->source +
                "); dgemma quantize needs a BF16/F16/F32 checkpoint");
}

// A vision tower tensor copied through (docs/model.md §7.1): counted, its
// dtype noted.
static void note_vision_tensor(const TensorView& t, ExportReport& report) {
  ++report.vision_copied;
  report.vision_bytes += t.nbytes();
  const std::string dt(dtype_name(t.dtype()));
  if (("+" + report.vision_dtypes + "+").find("+" + dt + "+") == std::string::npos)
    report.vision_dtypes += (report.vision_dtypes.empty() ? "" : "+") + dt;
}

ExportReport export_quantized(const std::string& in_dir, const std::string& out_dir, const ExportOptions& o) {
  check_export_input(in_dir, o);
  if (o.expert_inputs && o.format != ExportFormat::kNvfp4Experts)
    throw Error(std::string(export_format_name(o.format)) +
                " has no activation parameters to calibrate (docs/formats.md §3.5); calibration feeds nvfp4-experts");
  const std::string config_path = (fs::path(in_dir) / "config.json").string();
  const CheckpointSource src = open_checkpoint(in_dir);
  const ModelConfig& config = src.config;
  if (o.expert_inputs &&
      (o.expert_inputs->num_layers != config.num_layers || o.expert_inputs->num_experts != config.num_experts))
    throw Error(in_dir + ": the calibrated ranges cover " + std::to_string(o.expert_inputs->num_layers) +
                " layers of " + std::to_string(o.expert_inputs->num_experts) + " experts, the checkpoint has " +
                std::to_string(config.num_layers) + " of " + std::to_string(config.num_experts));
  const TensorStore& store = src.store;
  prepare_out_dir(in_dir, out_dir);

  const std::vector<ExpectedTensor> expected = expected_tensors(config);
  const auto names = map_names(expected, store);
  const std::unique_ptr<FormatWriter> writer = make_writer(o);
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
      else if (it.src->shape() == it.ex->shape && is_float_matrix(*it.ex, *it.src) &&
               writer->quantizes(*it.ex, *it.src, it))
        it.action = Action::kQuantize;
    }
    if (it.action == Action::kDrop)
      ++report.dropped;
    else if (it.action == Action::kCopy)
      ++report.copied;
    if (it.action == Action::kCopy && is_vision_tensor(n))
      note_vision_tensor(*it.src, report);
    else
      ++report.quantized;
    items.push_back(it);
  }

  SafetensorsStreamWriter w;
  for (const Item& it : items) {
    if (it.action == Action::kCopy)
      w.declare(it.src->name(), it.src->dtype(), it.src->shape());
    else if (it.action == Action::kQuantize)
      writer->declare(it, w);
  }
  w.set_metadata("format", writer->file_format());
  report.out_file = (fs::path(out_dir) / "model.safetensors").string();
  w.begin(report.out_file);
  uint64_t done = 0;
  for (const Item& it : items) {
    if (it.action == Action::kCopy)
      copy_through(*it.src, w);
    else if (it.action == Action::kQuantize)
      writer->produce(it, w);
    release_mapped_pages(it.src->data, it.src->nbytes());  // keep resident memory at the output's size
    done += it.src->nbytes();
    if (o.progress) o.progress(done, report.input_bytes, it.src->name());
  }
  w.finish();
  report.output_bytes = fs::file_size(report.out_file);

  // Config entries of the format (docs/formats.md §2.1, §3.4, §4.3).
  json::Value cfg = read_config(config_path);
  writer->write_config(cfg, items, out_dir);
  write_file_atomically((fs::path(out_dir) / "config.json").string(), json::dump(cfg, 2) + "\n");
  copy_side_files(in_dir, out_dir);
  return report;
}

void export_dequantized(const std::string& in_dir, const std::string& out_dir) {
  const std::string config_path = (fs::path(in_dir) / "config.json").string();
  const CheckpointSource src = open_checkpoint(in_dir);
  const ModelConfig& config = src.config;
  const TensorStore& store = src.store;
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
  write_file_atomically((fs::path(out_dir) / "config.json").string(), json::dump(json::Value(kept), 2) + "\n");
  copy_side_files(in_dir, out_dir);
}

}  // namespace dgemma
