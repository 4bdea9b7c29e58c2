#include "ops/op.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <iterator>

#include "dgemma/error.h"

namespace dgemma {

std::string_view op_scope(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbedding:
    case OpKind::kSoftEmbedding:
    case OpKind::kSoftcap:
    case OpKind::kSample:
    case OpKind::kAffine:
    case OpKind::kPoolCells:
    case OpKind::kScatterRows: return "model";  // the vision tower and the merge of its soft tokens
    default: return "layer";                    // concat_rows: the layer's KV cache
  }
}

std::string_view pass_name(Pass pass) {
  switch (pass) {
    case Pass::kEncoder: return "encoder";
    case Pass::kDecoder: return "decoder";
    case Pass::kVision: return "vision";
  }
  return "?";
}

namespace {

class Checker {
 public:
  explicit Checker(const OpCall& c) : c_(c) {}
  [[noreturn]] void fail(const std::string& why) const {
    std::string where = std::string(op_name(c_.kind));
    if (!c_.site.empty()) where += " (" + std::string(c_.site) + ")";
    if (c_.layer >= 0) where += " in layer " + std::to_string(c_.layer);
    where += ", " + std::string(pass_name(c_.pass)) + " pass";
    throw Error("op " + where + ": " + why);
  }
  void counts(size_t nin, size_t nw, size_t nout) const { counts(nin, nw, nout, nout); }
  // An op with optional outputs: nout_min..nout_max of them.
  void counts(size_t nin, size_t nw, size_t nout_min, size_t nout_max) const {
    if (c_.in.size() != nin || c_.w.size() != nw || c_.out.size() < nout_min || c_.out.size() > nout_max)
      fail("expected " + std::to_string(nin) + " inputs, " + std::to_string(nw) + " weights, " +
           std::to_string(nout_min) + (nout_max == nout_min ? "" : " or " + std::to_string(nout_max)) +
           " outputs, got " + std::to_string(c_.in.size()) + ", " + std::to_string(c_.w.size()) + ", " +
           std::to_string(c_.out.size()));
    for (const Tensor* t : c_.in)
      if (!t) fail("null input");
    for (Tensor* t : c_.out)
      if (!t) fail("null output");
  }
  void dtype(const Tensor& t, DType want, const char* what) const {
    if (t.dtype != want) fail(std::string(what) + " must be " + std::string(dtype_name(want)));
    if (t.host_stale) return;  // on a device: the backend that holds it checks its size
    size_t have = want == DType::kF32 ? t.f.size() : t.i.size();
    if (int64_t(have) != t.numel()) fail(std::string(what) + " storage does not match its shape " + t.shape_string());
  }
  void rank(const Tensor& t, size_t r, const char* what) const {
    if (t.shape.size() != r)
      fail(std::string(what) + " must have rank " + std::to_string(r) + ", got " + t.shape_string());
  }
  void wshape(const WeightRef* w, std::vector<int64_t> want, const char* what) const {
    if (!w || w->empty()) fail(std::string(what) + " weight is missing");
    if (w->shape != want)
      fail(std::string(what) + " weight " + w->name + " has shape " + shape_string(w->shape) + ", expected " +
           shape_string(want));
    if (!dtype_is_float(w->dtype))
      fail(std::string(what) + " weight " + w->name + " has non-float dtype " + std::string(dtype_name(w->dtype)));
  }
  void out_f32(size_t k, std::vector<int64_t> shape) const {
    Tensor& o = *c_.out[k];
    o.dtype = DType::kF32;
    o.i.clear();
    o.resize(std::move(shape));
  }
  void out_i32(size_t k, std::vector<int64_t> shape) const {
    Tensor& o = *c_.out[k];
    o.dtype = DType::kI32;
    o.f.clear();
    o.resize(std::move(shape));
  }

 private:
  const OpCall& c_;
};

// The shape rules and input checks of each op (the table at the top of
// ops/op.h), one function per op kind; prepare_op() looks them up in kOps.
void check_embedding(Checker& k, const OpCall& c) {
  k.counts(1, 1, 1);
  k.dtype(*c.in[0], DType::kI32, "ids");
  k.rank(*c.in[0], 1, "ids");
  if (!c.w[0] || c.w[0]->shape.size() != 2) k.fail("table must be 2-D");
  k.out_f32(0, {c.in[0]->dim(0), c.w[0]->shape[1]});
}

void check_soft_embedding(Checker& k, const OpCall& c) {
  k.counts(1, 1, 1);
  k.dtype(*c.in[0], DType::kF32, "logits");
  k.rank(*c.in[0], 2, "logits");
  if (!c.w[0] || c.w[0]->shape.size() != 2) k.fail("table must be 2-D");
  if (c.w[0]->shape[0] != c.in[0]->dim(1))
    k.fail("logits width " + std::to_string(c.in[0]->dim(1)) + " != vocab " + std::to_string(c.w[0]->shape[0]));
  k.out_f32(0, {c.in[0]->dim(0), c.w[0]->shape[1]});
}

void check_rms_norm(Checker& k, const OpCall& c) {
  if (c.w.size() == 0)
    k.counts(1, 0, 1);
  else
    k.counts(1, 1, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  if (c.in[0]->shape.empty()) k.fail("x must have rank >= 1");
  if (!c.w.empty()) k.wshape(c.w[0], {c.in[0]->dim(-1)}, "norm");
  if (!(c.attrs.eps > 0.0f)) k.fail("eps must be positive");
  k.out_f32(0, c.in[0]->shape);
}

void check_linear(Checker& k, const OpCall& c) {
  k.counts(1, 1, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  k.rank(*c.in[0], 2, "x");
  if (!c.w[0] || c.w[0]->shape.size() != 2) k.fail("weight must be 2-D");
  k.wshape(c.w[0], {c.w[0]->shape[0], c.in[0]->dim(1)}, "linear");
  k.out_f32(0, {c.in[0]->dim(0), c.w[0]->shape[0]});
}

void check_rope(Checker& k, const OpCall& c) {
  k.counts(2, 0, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  k.rank(*c.in[0], 3, "x");
  k.dtype(*c.in[1], DType::kI32, "positions");
  const Tensor& pos = *c.in[1];
  const bool two_d = pos.shape.size() == 2;  // (column, row) per row: the vision tower's 2-D RoPE
  if (two_d ? pos.dim(0) != c.in[0]->dim(0) || pos.dim(1) != 2 : pos.numel() != c.in[0]->dim(0))
    k.fail("positions " + pos.shape_string() + " do not match the " + std::to_string(c.in[0]->dim(0)) +
           " rows of x (one position, or a column and a row, per row)");
  const int64_t width = two_d ? c.in[0]->dim(2) / 2 : c.in[0]->dim(2);  // the split-half width
  if (width % 2 || (two_d && c.in[0]->dim(2) % 2) || c.attrs.rope_pairs < 0 || c.attrs.rope_pairs > width / 2)
    k.fail("invalid rotated pair count " + std::to_string(c.attrs.rope_pairs) + " for head dim " +
           std::to_string(c.in[0]->dim(2)) + (two_d ? " (2-D positions: head dim % 4 == 0, pairs <= d/4)" : ""));
  k.out_f32(0, c.in[0]->shape);
}

void check_attention(Checker& k, const OpCall& c) {
  const bool blocks = mask_uses_blocks(c.attrs.mask);
  const size_t base = c.in.size() - (blocks ? 1 : 0);
  const bool cached = base == 8;
  if (base != 5 && !cached)
    k.fail("expected 5 inputs, or 8 with a cache segment" + std::string(blocks ? ", plus the blocks input" : "") +
           ", got " + std::to_string(c.in.size()));
  k.counts(c.in.size(), 0, 1);
  const Tensor &q = *c.in[0], &kk = *c.in[1], &v = *c.in[2];
  for (int t = 0; t < 3; ++t) {
    k.dtype(*c.in[size_t(t)], DType::kF32, "q/k/v");
    k.rank(*c.in[size_t(t)], 3, "q/k/v");
  }
  k.dtype(*c.in[3], DType::kI32, "query positions");
  k.dtype(*c.in[4], DType::kI32, "key positions");
  if (kk.shape != v.shape) k.fail("keys " + kk.shape_string() + " and values " + v.shape_string() + " differ");
  if (q.dim(2) != kk.dim(2)) k.fail("query head dim != key head dim");
  if (kk.dim(1) == 0 || q.dim(1) % kk.dim(1)) k.fail("query heads not a multiple of key heads");
  if (c.in[3]->numel() != q.dim(0) || c.in[4]->numel() != kk.dim(0)) k.fail("position counts do not match");
  if (cached) {
    const Tensor &ck = *c.in[5], &cv = *c.in[6], &cp = *c.in[7];
    k.dtype(ck, DType::kF32, "cached keys");
    k.dtype(cv, DType::kF32, "cached values");
    k.dtype(cp, DType::kI32, "cached key positions");
    k.rank(ck, 3, "cached keys");
    if (ck.shape != cv.shape)
      k.fail("cached keys " + ck.shape_string() + " and values " + cv.shape_string() + " differ");
    if (ck.dim(1) != kk.dim(1) || ck.dim(2) != kk.dim(2))
      k.fail("cached keys " + ck.shape_string() + " do not match the new keys " + kk.shape_string());
    if (cp.numel() != ck.dim(0)) k.fail("cached key position count does not match");
    if (c.attrs.skip_rows < 0 || c.attrs.skip_rows > ck.dim(0))
      k.fail("skip_rows " + std::to_string(c.attrs.skip_rows) + " outside the cache's " + std::to_string(ck.dim(0)) +
             " rows");
  } else if (c.attrs.skip_rows != 0) {
    k.fail("skip_rows without cache inputs");
  }
  if (blocks) {
    const Tensor& b = *c.in.back();
    k.dtype(b, DType::kI32, "blocks");
    if (b.numel() != q.dim(0) || kk.dim(0) != q.dim(0))
      k.fail("a blocks mask needs one block id per row and as many new keys as queries, got " +
             std::to_string(b.numel()) + " ids, " + std::to_string(q.dim(0)) + " queries and " +
             std::to_string(kk.dim(0)) + " keys");
    if (c.attrs.mask == AttentionMask::kJaxBlocks && c.attrs.window <= 0) k.fail("the JAX blocks mask needs a window");
  }
  k.out_f32(0, {q.dim(0), q.dim(1) * q.dim(2)});
}

void check_router_topk(Checker& k, const OpCall& c) {
  k.counts(1, 3, 2);
  k.dtype(*c.in[0], DType::kF32, "x");
  k.rank(*c.in[0], 2, "x");
  int64_t H = c.in[0]->dim(1);
  if (!c.w[1] || c.w[1]->shape.size() != 2) k.fail("router.proj must be 2-D");
  int64_t E = c.w[1]->shape[0];
  k.wshape(c.w[0], {H}, "router.scale");
  k.wshape(c.w[1], {E, H}, "router.proj");
  k.wshape(c.w[2], {E}, "router.per_expert_scale");
  if (c.attrs.top_k < 1 || c.attrs.top_k > E) k.fail("top_k " + std::to_string(c.attrs.top_k) + " out of range");
  k.out_i32(0, {c.in[0]->dim(0), c.attrs.top_k});
  k.out_f32(1, {c.in[0]->dim(0), c.attrs.top_k});
}

void check_moe_experts(Checker& k, const OpCall& c) {
  k.counts(3, 2, 1, 2);  // out[1]: the down projections' inputs (optional)
  if (c.out.size() == 2 && c.out[0] == c.out[1]) k.fail("outputs 0 and 1 alias");
  k.dtype(*c.in[0], DType::kF32, "x");
  k.rank(*c.in[0], 2, "x");
  k.dtype(*c.in[1], DType::kI32, "expert indices");
  k.rank(*c.in[1], 2, "expert indices");
  k.dtype(*c.in[2], DType::kF32, "expert weights");
  if (c.in[1]->shape != c.in[2]->shape || c.in[1]->dim(0) != c.in[0]->dim(0)) k.fail("indices/weights shape mismatch");
  if (!c.w[0] || c.w[0]->shape.size() != 3 || !c.w[1] || c.w[1]->shape.size() != 3)
    k.fail("expert weights must be 3-D");
  int64_t E = c.w[0]->shape[0], I2 = c.w[0]->shape[1], H = c.in[0]->dim(1);
  if (I2 % 2) k.fail("gate_up rows must be even");
  k.wshape(c.w[0], {E, I2, H}, "experts.gate_up_proj");
  k.wshape(c.w[1], {E, H, I2 / 2}, "experts.down_proj");
  // Indices still on a device are checked there (by the backend holding them).
  if (!c.in[1]->host_stale)
    for (int32_t e : c.in[1]->i)
      if (e < 0 || e >= E) k.fail("expert index " + std::to_string(e) + " out of range [0, " + std::to_string(E) + ")");
  k.out_f32(0, c.in[0]->shape);
  if (c.out.size() == 2) k.out_f32(1, {c.in[0]->dim(0), c.in[1]->dim(1), I2 / 2});
}

void check_two_same_shape(Checker& k, const OpCall& c) {
  k.counts(2, 0, 1);
  k.dtype(*c.in[0], DType::kF32, "a");
  k.dtype(*c.in[1], DType::kF32, "b");
  if (c.in[0]->shape != c.in[1]->shape)
    k.fail("shapes " + c.in[0]->shape_string() + " and " + c.in[1]->shape_string() + " differ");
  k.out_f32(0, c.in[0]->shape);
}

void check_scale(Checker& k, const OpCall& c) {
  k.counts(1, 1, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  k.wshape(c.w[0], {1}, "scalar");
  k.out_f32(0, c.in[0]->shape);
}

void check_softcap(Checker& k, const OpCall& c) {
  k.counts(1, 0, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  if (!(c.attrs.cap > 0.0f)) k.fail("cap must be positive");
  k.out_f32(0, c.in[0]->shape);
}

void check_concat_rows(Checker& k, const OpCall& c) {
  if (c.in.size() < 2) k.fail("expected at least 2 inputs, got " + std::to_string(c.in.size()));
  k.counts(c.in.size(), 0, 1);
  const Tensor& a = *c.in[0];
  if (a.dtype != DType::kF32 && a.dtype != DType::kI32) k.dtype(a, DType::kF32, "input 0");
  int64_t total = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const Tensor& b = *c.in[i];
    k.dtype(b, a.dtype, ("input " + std::to_string(i)).c_str());  // input 0's dtype, storage matching the shape
    if (b.shape.empty()) k.fail("inputs must have rank >= 1 (input " + std::to_string(i) + ")");
    if (i > 0 && std::vector<int64_t>(a.shape.begin() + 1, a.shape.end()) !=
                     std::vector<int64_t>(b.shape.begin() + 1, b.shape.end()))
      k.fail("rows of " + a.shape_string() + " and " + b.shape_string() + " (input " + std::to_string(i) + ") differ");
    total += b.dim(0);
  }
  if (c.attrs.skip_rows < 0 || c.attrs.skip_rows > total)
    k.fail("skip_rows " + std::to_string(c.attrs.skip_rows) + " outside [0, " + std::to_string(total) + "]");
  if (c.attrs.take_rows < 0 || c.attrs.skip_rows + c.attrs.take_rows > total)
    k.fail("take_rows " + std::to_string(c.attrs.take_rows) + " after skip_rows " + std::to_string(c.attrs.skip_rows) +
           " exceeds the " + std::to_string(total) + " rows");
  std::vector<int64_t> shape = a.shape;
  shape[0] = c.attrs.take_rows > 0 ? c.attrs.take_rows : total - c.attrs.skip_rows;
  if (a.dtype == DType::kI32)
    k.out_i32(0, std::move(shape));
  else
    k.out_f32(0, std::move(shape));
}

void check_sample(Checker& k, const OpCall& c) {
  k.counts(2, 0, 4);
  k.dtype(*c.in[0], DType::kF32, "logits");
  k.rank(*c.in[0], 2, "logits");
  k.dtype(*c.in[1], DType::kI32, "uniforms");
  k.rank(*c.in[1], 2, "uniforms");
  const int64_t M = c.in[0]->dim(0), V = c.in[0]->dim(1);
  if (V < 1 || V > int64_t(INT32_MAX)) k.fail("vocab " + std::to_string(V) + " outside [1, 2^31)");
  if (c.in[1]->dim(1) != 2 || (c.in[1]->dim(0) != 0 && c.in[1]->dim(0) != M))
    k.fail("uniforms must be [" + std::to_string(M) + ", 2] (one double per row) or [0, 2] (no draw), got " +
           c.in[1]->shape_string());
  if (!(c.attrs.temperature > 0.0f) || !std::isfinite(c.attrs.temperature))
    k.fail("temperature must be positive and finite, got " + std::to_string(c.attrs.temperature));
  for (size_t a = 1; a < 4; ++a)
    for (size_t b = 0; b < a; ++b)
      if (c.out[a] == c.out[b]) k.fail("outputs " + std::to_string(b) + " and " + std::to_string(a) + " alias");
  k.out_f32(0, {M, V});
  k.out_i32(1, {M});
  k.out_f32(2, {M});
  k.out_i32(3, {M});
}

void check_affine(Checker& k, const OpCall& c) {
  k.counts(1, 2, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  k.rank(*c.in[0], 2, "x");
  k.wshape(c.w[0], {c.in[0]->dim(1)}, "shift");
  k.wshape(c.w[1], {c.in[0]->dim(1)}, "scale");
  k.out_f32(0, c.in[0]->shape);
}

void check_pool_cells(Checker& k, const OpCall& c) {
  k.counts(2, 0, 1);
  k.dtype(*c.in[0], DType::kF32, "x");
  k.rank(*c.in[0], 2, "x");
  k.dtype(*c.in[1], DType::kI32, "cells");
  if (c.in[1]->numel() != c.in[0]->dim(0)) k.fail("cell count does not match the rows of x");
  if (c.attrs.out_rows < 1) k.fail("out_rows must be positive, got " + std::to_string(c.attrs.out_rows));
  if (!c.in[1]->host_stale)
    for (int32_t cell : c.in[1]->i)
      if (cell < 0 || cell >= c.attrs.out_rows)
        k.fail("cell " + std::to_string(cell) + " outside [0, " + std::to_string(c.attrs.out_rows) + ")");
  k.out_f32(0, {c.attrs.out_rows, c.in[0]->dim(1)});
}

void check_scatter_rows(Checker& k, const OpCall& c) {
  k.counts(3, 0, 1);
  k.dtype(*c.in[0], DType::kF32, "base");
  k.dtype(*c.in[1], DType::kF32, "src");
  k.dtype(*c.in[2], DType::kI32, "rows");
  k.rank(*c.in[0], 2, "base");
  k.rank(*c.in[1], 2, "src");
  const int64_t T = c.in[0]->dim(0), n = c.in[1]->dim(0);
  if (c.in[1]->dim(1) != c.in[0]->dim(1))
    k.fail("src " + c.in[1]->shape_string() + " and base " + c.in[0]->shape_string() + " differ in width");
  if (c.in[2]->numel() != n)
    k.fail(std::to_string(c.in[2]->numel()) + " row indices for " + std::to_string(n) + " source rows");
  if (!c.in[2]->host_stale) {
    std::vector<bool> seen(size_t(T), false);
    for (int32_t r : c.in[2]->i) {
      if (r < 0 || r >= T) k.fail("row " + std::to_string(r) + " outside [0, " + std::to_string(T) + ")");
      if (seen[size_t(r)]) k.fail("row " + std::to_string(r) + " given twice");
      seen[size_t(r)] = true;
    }
  }
  k.out_f32(0, c.in[0]->shape);
}

struct OpInfo {
  OpKind kind;
  std::string_view name;
  void (*check)(Checker& k, const OpCall& c);
};

// Indexed by OpKind (a static_assert below keeps the order).
constexpr OpInfo kOps[] = {
    {OpKind::kEmbedding, "embedding", check_embedding},
    {OpKind::kSoftEmbedding, "soft_embedding", check_soft_embedding},
    {OpKind::kRmsNorm, "rms_norm", check_rms_norm},
    {OpKind::kLinear, "linear", check_linear},
    {OpKind::kRope, "rope", check_rope},
    {OpKind::kAttention, "attention", check_attention},
    {OpKind::kRouterTopk, "router_topk", check_router_topk},
    {OpKind::kMoeExperts, "moe_experts", check_moe_experts},
    {OpKind::kGeluGlu, "gelu_glu", check_two_same_shape},
    {OpKind::kAdd, "add", check_two_same_shape},
    {OpKind::kScale, "scale", check_scale},
    {OpKind::kSoftcap, "softcap", check_softcap},
    {OpKind::kConcatRows, "concat_rows", check_concat_rows},
    {OpKind::kSample, "sample", check_sample},
    {OpKind::kAffine, "affine", check_affine},
    {OpKind::kPoolCells, "pool_cells", check_pool_cells},
    {OpKind::kScatterRows, "scatter_rows", check_scatter_rows},
};
static_assert(std::size(kOps) == kNumOpKinds);

constexpr bool ops_in_order() {
  for (int i = 0; i < kNumOpKinds; ++i)
    if (int(kOps[i].kind) != i) return false;
  return true;
}
static_assert(ops_in_order(), "kOps must list the op kinds in enum order");

}  // namespace

std::string_view op_name(OpKind kind) {
  const int i = int(kind);
  return i >= 0 && i < kNumOpKinds ? kOps[i].name : std::string_view("?");
}

void prepare_op(const OpCall& c) {
  Checker k(c);
  for (size_t a = 0; a < c.out.size(); ++a)
    for (size_t b = 0; b < c.in.size(); ++b)
      if (c.out[a] == c.in[b]) k.fail("output aliases an input");
  const int i = int(c.kind);
  if (i < 0 || i >= kNumOpKinds) k.fail("unknown op kind " + std::to_string(i));
  kOps[i].check(k, c);
}

std::vector<ConcatRowsPart> concat_rows_parts(const OpCall& c) {
  const Tensor& out = *c.out[0];
  const int64_t row = out.dim(0) == 0 ? 0 : out.numel() / out.dim(0);  // elements per row
  std::vector<ConcatRowsPart> parts;
  int64_t skip = c.attrs.skip_rows, left = out.dim(0);
  for (size_t i = 0; i < c.in.size() && left > 0; ++i) {
    const int64_t n = c.in[i]->dim(0), skipped = std::min(skip, n), taken = std::min(n - skipped, left);
    skip -= skipped;
    left -= taken;
    if (taken > 0) parts.push_back({i, skipped * row, taken * row});
  }
  return parts;
}

const Tensor* attention_blocks(const OpCall& c) { return mask_uses_blocks(c.attrs.mask) ? c.in.back() : nullptr; }

bool attention_visible(const OpAttrs& a, int64_t qpos, int64_t kpos, int32_t qblock, int32_t kblock) {
  const bool causal_window = kpos <= qpos && (a.window == 0 || qpos - kpos < a.window);
  const bool same_block = qblock >= 0 && qblock == kblock;
  switch (a.mask) {
    case AttentionMask::kNone: return true;
    case AttentionMask::kCausalWindow: return causal_window;
    case AttentionMask::kCommittedWindow: return kpos >= a.first_canvas_pos || kpos > qpos - a.window;
    case AttentionMask::kCausalWindowBlocks: return causal_window || same_block;
    case AttentionMask::kJaxBlocks: return (kpos <= qpos || same_block) && std::abs(qpos - kpos) < a.window;
  }
  return false;
}

AttentionKeys attention_keys(const OpCall& c) {
  AttentionKeys keys;
  if (c.in.size() - (mask_uses_blocks(c.attrs.mask) ? 1 : 0) == 8) {
    const int64_t first = c.attrs.skip_rows;
    keys.parts[0] = {c.in[5], c.in[6], c.in[7], first, c.in[5]->dim(0) - first};
  }
  keys.parts[1] = {c.in[1], c.in[2], c.in[4], 0, c.in[1]->dim(0)};
  return keys;
}

}  // namespace dgemma
