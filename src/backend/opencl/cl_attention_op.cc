// Attention on the device (docs/opencl.md §3), computing like the CPU's
// scalar reference (src/backend/cpu/cpu_attention.cc). The keys' two segments
// (ops/op.h attention_keys: the cache's kept rows, then the new rows) are read
// where they lie; neither is copied into one buffer.
#include "backend/opencl/cl_ops.h"
#include "dgemma/error.h"

namespace dgemma::opencl {

namespace {

int mask_code(AttentionMask mask) {  // kernels_attention.cl MASK_*
  switch (mask) {
    case AttentionMask::kNone: return 0;
    case AttentionMask::kCausalWindow: return 1;
    case AttentionMask::kCommittedWindow: return 2;
    case AttentionMask::kCausalWindowBlocks: return 3;
    case AttentionMask::kJaxBlocks: return 4;
  }
  throw Error("opencl backend: internal: unknown attention mask " + std::to_string(int(mask)));
}

}  // namespace

void run_attention(ClOp& op) {
  const OpCall& c = op.call();
  const Tensor& q = *c.in[0];
  const AttentionKeys keys = attention_keys(c);
  const AttentionKeyPart &p0 = keys.parts[0], &p1 = keys.parts[1];
  const int64_t M = q.dim(0), Hq = q.dim(1), d = q.dim(2), Hk = c.in[1]->dim(1);
  as_int(M * Hq * d, "output element count", op);
  if (M == 0 || Hq == 0 || d == 0) return;  // an empty output
  // Element counts of each key segment's whole tensor, as the kernel indexes them.
  if (p0.k) as_int(p0.k->numel(), "cached key element count", op);
  as_int(p1.k->numel(), "key element count", op);
  const int rows0 = int(p0.rows), first0 = int(p0.first), rows1 = int(p1.rows);
  as_int(int64_t(rows0) + rows1, "key count", op);
  const cl_mem qb = op.input(0), qpos = op.input(3), out = op.output(0);
  // A segment without rows is never read: any buffer stands in for it.
  cl_mem k0 = qb, v0 = qb, pos0 = qpos, k1 = qb, v1 = qb, pos1 = qpos;
  if (rows0 > 0) {
    k0 = op.input(5);
    v0 = op.input(6);
    pos0 = op.input(7);
  }
  if (rows1 > 0) {
    k1 = op.input(1);
    v1 = op.input(2);
    pos1 = op.input(4);
  }
  const int hq = int(Hq), hk = int(Hk), dd = int(d), mask = mask_code(c.attrs.mask), window = c.attrs.window;
  const cl_long first_canvas_pos = c.attrs.first_canvas_pos;
  // The block masks' ids, one per new row (docs/model.md §7.7); any buffer
  // stands in (unread) for the other masks.
  const Tensor* block_ids = attention_blocks(c);
  const cl_mem blocks = block_ids ? op.input(c.in.size() - 1) : qpos;
  const int has_blocks = block_ids ? 1 : 0;
  const size_t group = size_t(op.runtime().norm_group());
  op.launch("attention", {size_t(M * Hq) * group}, {group}, qb, qpos, k0, v0, pos0, first0, rows0, k1, v1, pos1, rows1,
            out, hq, hk, dd, mask, window, first_canvas_pos, blocks, has_blocks);
}

}  // namespace dgemma::opencl
