#include "backend/differential_backend.h"

#include <cmath>

#include "backend/inject_backend.h"
#include "dgemma/error.h"

namespace dgemma {

OpComparison compare_output(const Tensor& ref, const Tensor& got, const Tolerance& tol) {
  OpComparison r;
  const size_t n = size_t(ref.numel());
  if (ref.dtype == DType::kI32) {
    for (size_t k = 0; k < n; ++k) {
      if (ref.i[k] != got.i[k]) {
        r.ok = false;
        r.failure = "value";
        r.max_abs = std::max(r.max_abs, std::fabs(double(ref.i[k]) - double(got.i[k])));
      }
    }
    return r;
  }
  // A NaN on either side fails the comparison: there is no meaningful
  // distance or cosine then, and they are reported as NaN (never as a clean
  // 1.0 from the elements that remain).
  double max_ref = 0, dot = 0, nr = 0, ng = 0;
  int64_t nan_ref = 0, nan_got = 0, first_nan = -1;
  bool inf_mismatch = false, inf_in_target = false;
  for (size_t k = 0; k < n; ++k) {
    const double a = ref.f[k], b = got.f[k];
    if (std::isnan(a) || std::isnan(b)) {
      nan_ref += std::isnan(a) ? 1 : 0;
      nan_got += std::isnan(b) ? 1 : 0;
      if (first_nan < 0) first_nan = int64_t(k);
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) {
        inf_mismatch = true;
        inf_in_target = inf_in_target || std::isinf(b);
      }
      continue;
    }
    max_ref = std::max(max_ref, std::fabs(a));
    const double d = std::fabs(a - b);
    r.max_abs = std::max(r.max_abs, d);
    r.max_rel = std::max(r.max_rel, d / std::max(std::fabs(a), 1e-6));
    dot += a * b;
    nr += a * a;
    ng += b * b;
  }
  if (nan_ref > 0 || nan_got > 0) {
    r.ok = false;
    r.failure = "nan";
    r.max_abs = r.max_rel = r.cosine = std::nan("");
    r.message = std::to_string(nan_got) + " NaN in the target's output, " + std::to_string(nan_ref) +
                " in the reference's (first at element " + std::to_string(first_nan) + " of " + std::to_string(n) + ")";
    return r;
  }
  if (inf_mismatch) {
    r.ok = false;
    r.failure = inf_in_target ? "nan" : "value";
    r.max_abs = INFINITY;
    r.cosine = std::nan("");
    return r;
  }
  r.cosine = (nr > 0 && ng > 0) ? dot / std::sqrt(nr * ng) : (nr == ng ? 1.0 : 0.0);
  const bool abs_ok = r.max_abs <= tol.atol + tol.rtol * max_ref;
  const bool cos_ok = r.cosine >= tol.min_cosine || (nr == 0 && ng == 0);
  if (!abs_ok || !cos_ok) {
    r.ok = false;
    r.failure = "value";
  }
  return r;
}

static void pad_with_canary(Tensor& t) {
  if (t.dtype == DType::kF32)
    t.f.resize(size_t(t.numel()) + kCanaryElements, kCanaryF32);
  else
    t.i.resize(size_t(t.numel()) + kCanaryElements, kCanaryI32);
}

static bool canary_intact(Tensor& t) {
  const size_t n = size_t(t.numel());
  // A kernel that resized its output storage is as wrong as one that wrote
  // past it.
  bool ok = (t.dtype == DType::kF32 ? t.f.size() : t.i.size()) == n + kCanaryElements;
  if (t.dtype == DType::kF32) {
    for (size_t k = n; k < t.f.size(); ++k) ok &= t.f[k] == kCanaryF32;
    t.f.resize(n);
  } else {
    for (size_t k = n; k < t.i.size(); ++k) ok &= t.i[k] == kCanaryI32;
    t.i.resize(n);
  }
  return ok;
}

void DifferentialBackend::run(const OpCall& call) {
  const int64_t index = index_++;
  ref_.run(call);
  if (options_.target_limit >= 0 && index >= options_.target_limit) return;

  // Target outputs: same shapes as the reference's, canary-padded.
  std::vector<Tensor> outs(call.out.size());
  OpCall tc = call;
  for (size_t k = 0; k < outs.size(); ++k) {
    outs[k].dtype = call.out[k]->dtype;
    outs[k].shape = call.out[k]->shape;
    if (outs[k].dtype == DType::kF32)
      outs[k].f.assign(size_t(outs[k].numel()), 0.0f);
    else
      outs[k].i.assign(size_t(outs[k].numel()), 0);
    pad_with_canary(outs[k]);
    tc.out[k] = &outs[k];
  }
  listener_.on_begin(index, call);
  OpComparison result;
  // An op the target refuses (not implemented there) is reported as such,
  // not as the error its run() would throw; the model goes on with the
  // reference's outputs, so later ops are still compared.
  if (std::string why; !target_.supports(tc, &why)) {
    result.ok = false;
    result.failure = "unsupported";
    result.message = target_.name() + " does not run this op: " + why;
    listener_.on_result(index, call, result);
    return;
  }
  try {
    target_.run(tc);
  } catch (const std::exception& e) {
    result.ok = false;
    result.failure = "error";
    result.message = e.what();
    listener_.on_result(index, call, result);
    return;
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!canary_intact(outs[k])) {
      result.ok = false;
      result.failure = "oob";
      result.output = int(k);
      result.message = "write past the end of output " + std::to_string(k) + " (canary overwritten)";
      listener_.on_result(index, call, result);
      return;
    }
  }
  // Report the first failing output, else the one with the largest error.
  for (size_t k = 0; k < outs.size(); ++k) {
    if (options_.routing_from_reference && call.kind == OpKind::kRouterTopk && k == 0) continue;
    OpComparison c = compare_output(*call.out[k], outs[k], options_.tolerance);
    c.output = int(k);
    if (!c.ok) {
      result = c;
      break;
    }
    if (c.max_abs >= result.max_abs) result = c;
  }
  listener_.on_result(index, call, result);
}

}  // namespace dgemma
