#pragma once
// Private to `dgemma quantize` (quantize/export.cc): one writer per output
// format, each in its own file (export_nf4.cc, export_nvfp4.cc,
// export_mlx.cc). The driver decides which stored tensors are text-model
// weights and which copies of tied weights are dropped; a format writer
// decides which of the weights it quantizes, declares their output tensors,
// writes them, and writes its entries into config.json.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/tensor_names.h"
#include "core/json.h"
#include "io/safetensors.h"
#include "quantize/export.h"
#include "quantize/quantizers.h"
#include "quantize/stream_writer.h"

namespace dgemma::quant {

// Elements quantized per step (a multiple of every block size): large tensors
// are processed in row chunks of about this size, so memory stays small.
inline constexpr int64_t kChunkElems = int64_t(1) << 22;

enum class Action { kCopy, kDrop, kQuantize };

// One stored tensor of the input and what becomes of it.
struct Item {
  const TensorView* src = nullptr;
  const ExpectedTensor* ex = nullptr;  // null: not a text-model tensor (copied through)
  Action action = Action::kCopy;
  int bits = 4, group = 64;  // MLX affine: the tensor's bits and group
};

class FormatWriter {
 public:
  virtual ~FormatWriter() = default;
  // Whether this format quantizes weight `ex` (stored as `v`, a float dtype
  // of the expected shape); may record per-tensor parameters in `item`.
  virtual bool quantizes(const ExpectedTensor& ex, const TensorView& v, Item& item) const = 0;
  // The output tensors of a quantized item, then their bytes.
  virtual void declare(const Item& item, SafetensorsStreamWriter& w) const = 0;
  virtual void produce(const Item& item, SafetensorsStreamWriter& w) const = 0;
  // The format's entries in config.json `cfg` (and files of its own in out_dir).
  virtual void write_config(json::Value& cfg, const std::vector<Item>& items, const std::string& out_dir) const = 0;
  // The safetensors metadata "format" value.
  virtual const char* file_format() const { return "pt"; }
};

std::unique_ptr<FormatWriter> make_nf4_writer(const ExportOptions& options);
std::unique_ptr<FormatWriter> make_nvfp4_experts_writer(const ExportOptions& options);
std::unique_ptr<FormatWriter> make_mlx_writer(const ExportOptions& options);

// Shared helpers of the writers.
std::string module_of(const std::string& name);  // "P.weight" -> "P"
bool ends_with(const std::string& s, const char* suffix);
quant::FloatSource source_of(const TensorView& v, int64_t begin = 0, int64_t n = -1);

}  // namespace dgemma::quant
