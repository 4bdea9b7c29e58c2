#include "backend/opencl/opencl_backend.h"

#include <charconv>

#include "backend/opencl/cl_op.h"
#include "backend/opencl/cl_quant_upload.h"
#include "backend/opencl/cl_runtime.h"
#include "backend/opencl/cl_weights.h"
#include "dgemma/error.h"

namespace dgemma {

namespace {

bool parse_index(std::string_view s, int* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && *out >= 0;
}

}  // namespace

OpenClBackendOptions parse_opencl_spec(const std::string& spec) {
  OpenClBackendOptions o;
  if (spec == "opencl") return o;
  if (spec.rfind("opencl:", 0) != 0) throw Error("backend '" + spec + "' is not an OpenCL backend name");
  std::string_view rest = std::string_view(spec).substr(7);
  if (rest.empty())
    throw Error("backend '" + spec + "': nothing after 'opencl:' (opencl:P.D selects platform P's device D)");
  while (!rest.empty()) {
    const size_t cut = rest.find(',');
    const std::string_view item = rest.substr(0, cut);
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
    if (item == "debug" || item == "sync") {
      o.debug = true;
      continue;
    }
    const size_t dot = item.find('.');
    if (dot != std::string_view::npos && o.platform < 0 && parse_index(item.substr(0, dot), &o.platform) &&
        parse_index(item.substr(dot + 1), &o.device))
      continue;
    throw Error("backend '" + spec + "': '" + std::string(item) +
                "' is neither a device (P.D: platform P, device D, as `dgemma devices` lists them) nor an option "
                "(debug, or its synonym sync)");
  }
  return o;
}

struct OpenClBackend::Impl {
  std::shared_ptr<opencl::ClRuntime> runtime;
  std::unique_ptr<opencl::WeightCache> weights;
};

OpenClBackend::OpenClBackend(OpenClBackendOptions options) : options_(options), impl_(std::make_unique<Impl>()) {
  std::string spec = options.platform < 0
                         ? "opencl"
                         : "opencl:" + std::to_string(options.platform) + "." + std::to_string(options.device);
  const opencl::ClDevice device = opencl::find_device(options.platform, options.device, spec);
  impl_->runtime = std::make_shared<opencl::ClRuntime>(device);
  impl_->runtime->debug = options.debug;  // guard zones and NaN-filled outputs (docs/opencl.md §4)
  impl_->weights = std::make_unique<opencl::WeightCache>(impl_->runtime);
}

OpenClBackend::~OpenClBackend() = default;

std::string OpenClBackend::name() const { return impl_->runtime->info().spec; }

const OpenClDeviceInfo& OpenClBackend::device() const { return impl_->runtime->info(); }

bool opencl_supports(const OpCall& call, std::string* why) {
  auto refuse = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!opencl::implemented_on_opencl(call.kind))
    return refuse(std::string(op_name(call.kind)) + " is not yet on OpenCL");
  // Quantized and FP8 weights: the ops whose kernels decode them (docs/opencl.md §3).
  const bool fp8 = call.kind == OpKind::kLinear || call.kind == OpKind::kEmbedding;
  const bool decodes = fp8 || call.kind == OpKind::kMoeExperts || call.kind == OpKind::kSoftEmbedding;
  for (const WeightRef* w : call.w) {
    // A quantized weight bound with a dense fp32 copy (quantize/quantized_weight.h
    // bound_dense: router.proj) is read as that copy by the ops that do not decode.
    if (w->quant && (decodes || !w->quant->bound_dense)) {
      if (!decodes)
        return refuse(
            "weight '" + w->name + "' is quantized: " + std::string(op_name(call.kind)) +
            " does not take quantized weights on OpenCL (linear, embedding, soft_embedding and moe_experts do)");
      const std::string layout = opencl::opencl_quant_refusal(*w->quant);
      if (!layout.empty()) return refuse("weight '" + w->name + "': " + layout);
      continue;
    }
    if (call.kind == OpKind::kScale) continue;  // its one value is read on the host
    if (w->dtype == DType::kF8_E4M3 && fp8) continue;
    if (w->dtype != DType::kF32 && w->dtype != DType::kBF16 && w->dtype != DType::kF16)
      return refuse("weight '" + w->name + "' is " + std::string(dtype_name(w->dtype)) +
                    ": the OpenCL backend reads F32, BF16 and F16 weights (and F8_E4M3 in linear and embedding)");
  }
  return true;
}

bool OpenClBackend::supports(const OpCall& call, std::string* why) const {
  if (call.kind == OpKind::kSample && !impl_->runtime->info().fp64) {  // its sums are the CPU's, in double
    if (why) *why = "sample needs fp64 (cl_khr_fp64), which " + impl_->runtime->info().name + " does not offer";
    return false;
  }
  return opencl_supports(call, why);
}

void OpenClBackend::run(const OpCall& call) {
  std::string why;
  if (!supports(call, &why)) throw Error("opencl backend: " + why + " (" + opencl::where_of(call) + ")");
  opencl::ClOp op(impl_->runtime, *impl_->weights, call);
  opencl::run_op(op);
  op.finish(options_.debug);
}

void OpenClBackend::release_weight_copies() { impl_->weights->clear(); }

std::optional<DeviceTraffic> OpenClBackend::device_traffic() const { return impl_->runtime->traffic; }

void OpenClBackend::reset_traffic() { impl_->runtime->traffic = DeviceTraffic{}; }

bool OpenClBackend::set_profiling(bool on) {
  impl_->runtime->set_profiling(on);
  return true;
}

std::vector<OpDeviceTime> OpenClBackend::take_profile() { return impl_->runtime->take_profile(); }

int64_t OpenClBackend::cached_weight_bytes() const { return impl_->weights->bytes(); }

}  // namespace dgemma
