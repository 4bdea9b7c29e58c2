// Attention of the OpenCL backend (docs/opencl.md §3): scale 1.0 and an fp32
// softmax (docs/model.md §1.3, §2.1), the masks of docs/model.md §2.2 and §2.4
// from absolute positions, grouped-query heads (query head h reads key head
// h / (Hq / Hk)).

// The mask codes the host passes (AttentionMask, ops/op.h).
#define MASK_NONE 0
#define MASK_CAUSAL_WINDOW 1
#define MASK_COMMITTED_WINDOW 2
#define MASK_CAUSAL_WINDOW_BLOCKS 3
#define MASK_JAX_BLOCKS 4

// qblock, kblock: the image blocks of the query and the key (docs/model.md
// §7.7; -1 none, and always -1 without a block mask).
int attention_visible(int mask, int window, long first_canvas_pos, int qpos, int kpos, int qblock, int kblock) {
  const int causal_window = kpos <= qpos && (window == 0 || (long)qpos - (long)kpos < (long)window);
  const int same_block = qblock >= 0 && qblock == kblock;
  if (mask == MASK_CAUSAL_WINDOW) return causal_window;
  if (mask == MASK_COMMITTED_WINDOW) return (long)kpos >= first_canvas_pos || (long)kpos > (long)qpos - (long)window;
  if (mask == MASK_CAUSAL_WINDOW_BLOCKS) return same_block || causal_window;
  if (mask == MASK_JAX_BLOCKS) {
    const long gap = (long)qpos - (long)kpos;
    return (kpos <= qpos || same_block) && (gap < 0 ? -gap : gap) < (long)window;
  }
  return 1;
}

// q·k in the reference's order (backend/cpu dot_f32): four running sums over
// the elements 4i, 4i+1, 4i+2, 4i+3, the tail into the first, then paired.
float attention_dot(__global const float* a, __global const float* b, int n) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// The keys are two segments read where they lie (ops/op.h attention_keys):
// key s < rows0 is row first0 + s of k0/v0/pos0 (the cache), key s >= rows0 is
// row s - rows0 of k1/v1/pos1 (the new rows). Row offsets of head kh.
#define ATTENTION_ROW(s)                                                             \
  (((size_t)((s) < rows0 ? first0 + (s) : (s) - rows0) * (size_t)Hk + (size_t)kh) * (size_t)d)
#define ATTENTION_POS(s) ((s) < rows0 ? pos0[first0 + (s)] : pos1[(s) - rows0])
// Key s's block: the cache's keys have none, a new row's is in blocks.
#define ATTENTION_BLOCK(s) (has_blocks && (s) >= rows0 ? blocks[(s) - rows0] : -1)

// Key s's score for the work-group's query, or -INFINITY where masked.
#define ATTENTION_SCORE(s)                                                                              \
  (attention_visible(mask, window, first_canvas_pos, qp, ATTENTION_POS(s), qb, ATTENTION_BLOCK(s))     \
       ? attention_dot(qr, ((s) < rows0 ? k0 : k1) + ATTENTION_ROW(s), d)                               \
       : -INFINITY)

// One work-group of NORM_WG work-items per (query row m, query head h); out
// row (m, h) is d floats at (m·Hq + h)·d. Two passes over the keys, so that
// no key count is too long for local memory:
//  1. each work-item scores a strided share of the keys; a tree reduction
//     gives the maximum (no visible key: a zero row, never NaN, as the
//     reference gives);
//  2. tile by tile of NORM_WG keys, each work-item scores its key again and
//     puts e = exp(score - max) in local memory; then each work-item adds
//     e·v over the tile's keys, in key order, to its own elements of the
//     output row (elements l, l + NORM_WG, ...), which holds the running sum.
// A tree reduction gives Σe, and the row is multiplied by 1/Σe at the end
// (the reference multiplies each e by 1/Σe first: the same up to rounding).
// Keys of weight 0 (masked ones) add nothing and are skipped.
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void attention(
    __global const float* q, __global const int* qpos, __global const float* k0, __global const float* v0,
    __global const int* pos0, int first0, int rows0, __global const float* k1, __global const float* v1,
    __global const int* pos1, int rows1, __global float* out, int Hq, int Hk, int d, int mask, int window,
    long first_canvas_pos, __global const int* blocks, int has_blocks) {
  __local float red[NORM_WG];
  __local float weight[NORM_WG];
  const int l = get_local_id(0);
  const int mh = get_group_id(0);
  const int m = mh / Hq, h = mh - m * Hq, kh = h / (Hq / Hk);
  const int S = rows0 + rows1;
  const int qp = qpos[m];
  const int qb = has_blocks ? blocks[m] : -1;
  __global const float* qr = q + (size_t)mh * (size_t)d;
  __global float* o = out + (size_t)mh * (size_t)d;

  float mx = -INFINITY;
  for (int s = l; s < S; s += NORM_WG) {
    const float sc = ATTENTION_SCORE(s);
    mx = mx < sc ? sc : mx;
  }
  mx = group_max(red, mx);
  for (int j = l; j < d; j += NORM_WG) o[j] = 0.0f;
  // No visible key: no second pass, a zero row (the same for the whole group,
  // which reaches every barrier below together).
  const int seen = mx == -INFINITY ? 0 : S;

  float sum = 0.0f;
  for (int t0 = 0; t0 < seen; t0 += NORM_WG) {
    const int s = t0 + l;
    float e = 0.0f;
    if (s < S) e = exp(ATTENTION_SCORE(s) - mx);
    weight[l] = e;
    sum += e;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int n = min(NORM_WG, S - t0);
    for (int j = l; j < d; j += NORM_WG) {
      float acc = o[j];
      for (int i = 0; i < n; ++i) {
        const float p = weight[i];
        if (p == 0.0f) continue;
        const int si = t0 + i;
        acc += p * ((si < rows0 ? v0 : v1) + ATTENTION_ROW(si))[j];
      }
      o[j] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float inv = 1.0f / group_sum(red, sum);
  if (seen > 0)
    for (int j = l; j < d; j += NORM_WG) o[j] *= inv;
}
