// dgemma compare A.safetensors B.safetensors [--atol X] [--rtol X] [--rows N]
#include <cstdio>

#include "cli.h"
#include "core/json.h"
#include "dgemma/error.h"
#include "flags.h"
#include "io/tensor_io.h"

namespace dgemma::cli {
namespace {

// Rows [0, n) of `t` along its second-to-last axis (all of them when n is 0
// or t has no more).
Tensor first_rows(Tensor t, int64_t n) {
  if (n <= 0 || t.shape.size() < 2 || t.dim(-2) <= n) return t;
  const int64_t rows = t.dim(-2), w = t.dim(-1), outer = t.numel() / (rows * w);
  std::vector<int64_t> shape = t.shape;
  shape[shape.size() - 2] = n;
  Tensor o = t.dtype == DType::kF32 ? Tensor::f32(shape) : Tensor::i32(shape);
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t k = 0; k < n * w; ++k) {
      const size_t from = size_t(b * rows * w + k), to = size_t(b * n * w + k);
      if (t.dtype == DType::kF32)
        o.f[to] = t.f[from];
      else
        o.i[to] = t.i[from];
    }
  return o;
}

int run_compare(const Args& args) {
  double atol = 1e-3, rtol = 0.0;
  bool as_json = false, allow_missing = false;
  int64_t rows = 0;
  FlagParser p("dgemma compare EXPECTED.safetensors ACTUAL.safetensors [--atol X] [--rtol X] [--rows N] [--json]",
               "Compares every tensor of EXPECTED that ACTUAL also has: max absolute and relative error,\n"
               "elements outside atol + rtol*|expected|, and argmax agreement along the last axis.\n"
               "Input tensors (input_ids, *_position_ids, decoder_input_ids, self_conditioning_logits,\n"
               "pixel_values, image_position_ids, mm_token_type_ids) are skipped. Exits 1 when any tensor is\n"
               "out of tolerance, has another element count, has a NaN where the other has none, or an argmax\n"
               "differs, or a tensor is missing from ACTUAL.");
  p.add_double("--atol", &atol, "absolute tolerance");
  p.add_double("--rtol", &rtol, "relative tolerance");
  p.add_bool("--json", &as_json, "one JSON object per tensor, then a summary object");
  p.add_bool("--allow-missing", &allow_missing, "do not fail on tensors absent from ACTUAL");
  p.add_int("--rows", &rows,
            "compare only the first N rows (second-to-last axis) of each tensor that has more: the real "
            "patches of a padded vision case (0: all)",
            0, INT64_MAX);
  if (!p.parse(args)) return 0;
  if (p.positional().size() != 2) throw UsageError("compare: expected two safetensors files (see --help)");
  if (atol < 0 || rtol < 0) throw UsageError("compare: tolerances must be >= 0");
  TensorStore a = TensorStore::open_file(p.positional()[0]);
  TensorStore b = TensorStore::open_file(p.positional()[1]);
  int failures = 0, compared = 0, missing = 0;
  if (!as_json)
    std::printf("%-44s %12s %12s %10s %8s  %s\n", "tensor", "max_abs", "max_rel", "mismatch", "argmax", "ok");
  for (const auto& name : a.names()) {
    if (name == "input_ids" || name == "position_ids" || name == "decoder_input_ids" ||
        name == "decoder_position_ids" || name == "self_conditioning_logits" || name == "pixel_values" ||
        name == "image_position_ids" || name == "mm_token_type_ids")
      continue;
    const TensorView* vb = b.find(name);
    if (!vb) {
      ++missing;
      if (!allow_missing) ++failures;
      if (as_json)
        std::printf("{\"tensor\": %s, \"missing\": true}\n", json::quoted(name).c_str());
      else
        std::printf("%-44s missing from %s\n", name.c_str(), p.positional()[1].c_str());
      continue;
    }
    Tensor e = first_rows(tensor_from_view(*a.find(name)), rows), x = first_rows(tensor_from_view(*vb), rows);
    CompareResult r = compare_tensors(e, x, atol, rtol);
    const bool ok = !r.shape_mismatch && !r.nan_mismatch && r.mismatches == 0 && r.argmax_disagree == 0;
    failures += !ok;
    ++compared;
    if (as_json) {
      json::Value o = json::Object{};
      o.set("tensor", name);
      o.set("numel", r.numel);
      o.set("shape_mismatch", r.shape_mismatch);
      o.set("max_abs", r.max_abs);
      o.set("max_rel", r.max_rel);
      o.set("mismatches", r.mismatches);
      o.set("argmax_rows", r.argmax_rows);
      o.set("argmax_disagree", r.argmax_disagree);
      o.set("ok", ok);
      std::printf("%s\n", json::dump(o).c_str());
    } else if (r.shape_mismatch) {
      std::printf("%-44s element count differs (%lld vs %lld)  FAIL\n", name.c_str(), (long long)e.numel(),
                  (long long)x.numel());
    } else {
      char am[32] = "-";
      if (r.argmax_rows)
        std::snprintf(am, sizeof am, "%lld/%lld", (long long)(r.argmax_rows - r.argmax_disagree),
                      (long long)r.argmax_rows);
      std::printf("%-44s %12.3g %12.3g %10lld %8s  %s\n", name.c_str(), r.max_abs, r.max_rel, (long long)r.mismatches,
                  am, ok ? "ok" : "FAIL");
    }
  }
  if (as_json) {
    std::printf("{\"summary\": true, \"compared\": %d, \"missing\": %d, \"failures\": %d}\n", compared, missing,
                failures);
  } else {
    std::printf("\n%d tensors compared, %d missing, %d out of tolerance (atol %g, rtol %g)\n", compared, missing,
                failures, atol, rtol);
  }
  return failures ? 1 : 0;
}

const Subcommand kCompare("compare", "compare two safetensors files tensor by tensor (parity check)", run_compare);

}  // namespace
}  // namespace dgemma::cli
