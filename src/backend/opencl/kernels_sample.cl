// The sample op of the OpenCL backend (docs/opencl.md §3; ops/op.h kSample,
// ops/row_sampling.h process_row). Its results are the CPU's bit for bit where
// the CPU computes in double: the kernel needs fp64 (cl_khr_fp64), and a device
// without it has no sample kernel (the backend refuses the op there).
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define SAMPLE_WG 256  // work-items per row: kGroup of cl_ops.h

// sample_row: one work-group per row r.
// 1. In parallel: z = x / T, the quotient of the two floats rounded once to
//    float (the double quotient of two floats, rounded to float, is the
//    correctly rounded float quotient: no device's fp32 division precision
//    matters), with the first maximum and the first NaN or +inf; each
//    work-item scans its strided indices in ascending order and a tree in
//    local memory keeps the larger value, the lower index on ties (the
//    reference's "first maximum"). A row with a bad value or without a finite
//    maximum is marked (ops/row_sampling.h bad_row_mark) and ends there.
// 2. In parallel: p = exp(z - max z), the float difference as the reference
//    computes it, exponentiated in double and rounded to float (the correctly
//    rounded fp32 exponential), kept in `p` (a scratch row).
// 3. Work-item 0 alone: the sums S = Σp and Σp·d in double in index order,
//    the entropy log(S) - Σp·d / S, and the inverse CDF at u·S, from the
//    same double additions in the same order as the reference, so the draw
//    follows from the same partial sums. The running sum at the start of
//    each chunk of SAMPLE_WG indices is kept, so the draw scans the chunk
//    ends, then one chunk.
__kernel __attribute__((reqd_work_group_size(SAMPLE_WG, 1, 1))) void sample_row(
    __global const float* logits, int V, float T, __global const int* uniforms, int draw, __global float* z_out,
    __global float* p_out, __global double* cdf_at, __global int* argmax, __global float* entropy,
    __global int* sample) {
  __local float l_max[SAMPLE_WG];
  __local int l_idx[SAMPLE_WG];
  __local int l_bad[SAMPLE_WG];
  const int t = get_local_id(0);
  const size_t r = get_group_id(0);
  __global const float* x = logits + r * (size_t)V;
  __global float* z = z_out + r * (size_t)V;
  __global float* p = p_out + r * (size_t)V;
  const double td = (double)T;

  float mx = -INFINITY;
  int mi = -1, bad = -1;
  for (int v = t; v < V; v += SAMPLE_WG) {
    const float zv = (float)((double)x[v] / td);
    z[v] = zv;
    if (isnan(zv) || zv == INFINITY) {
      if (bad < 0) bad = v;
    } else if (zv > mx) {
      mx = zv;
      mi = v;
    }
  }
  l_max[t] = mx;
  l_idx[t] = mi;
  l_bad[t] = bad;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = SAMPLE_WG / 2; step > 0; step /= 2) {
    if (t < step) {
      const int o = t + step;
      if (l_bad[o] >= 0 && (l_bad[t] < 0 || l_bad[o] < l_bad[t])) l_bad[t] = l_bad[o];
      if (l_idx[o] >= 0 &&
          (l_idx[t] < 0 || l_max[o] > l_max[t] || (l_max[o] == l_max[t] && l_idx[o] < l_idx[t]))) {
        l_max[t] = l_max[o];
        l_idx[t] = l_idx[o];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const int first_bad = l_bad[0], best = l_idx[0];
  const float row_max = l_max[0];
  if (first_bad >= 0 || best < 0) {  // the whole work-group
    if (t == 0) {
      argmax[r] = first_bad >= 0 ? -2 - first_bad : -1;
      entropy[r] = NAN;
      sample[r] = -1;
    }
    return;
  }

  for (int v = t; v < V; v += SAMPLE_WG) p[v] = (float)exp((double)(z[v] - row_max));
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (t != 0) return;

  argmax[r] = best;
  // The running sum Σp is the CDF of the draw: its value before each chunk of
  // SAMPLE_WG indices is kept (cdf_at), so that the draw walks one chunk.
  __global double* at = cdf_at + r * (size_t)((V + SAMPLE_WG - 1) / SAMPLE_WG);
  double sum_e = 0.0, sum_ed = 0.0;
  int last_positive = -1;
  for (int v = 0; v < V; ++v) {
    if (v % SAMPLE_WG == 0) at[v / SAMPLE_WG] = sum_e;
    const float e = p[v];
    if (e > 0.0f) {  // skip 0 · -inf
      const float d = z[v] - row_max;
      sum_e += (double)e;
      sum_ed += (double)e * (double)d;
      last_positive = v;
    }
  }
  entropy[r] = (float)(log(sum_e) - sum_ed / sum_e);
  if (!draw) {
    sample[r] = -1;
    return;
  }
  // u: the double whose bit pattern is the row's two words, low word first.
  const ulong bits = (ulong)(uint)uniforms[2 * r] | ((ulong)(uint)uniforms[2 * r + 1] << 32);
  const double target = as_double(bits) * sum_e;
  // The first index whose running sum exceeds the target lies in the first
  // chunk whose closing sum does (the sums never decrease); none does when
  // rounding leaves the target beyond the total: the last positive index.
  const int chunks = (V + SAMPLE_WG - 1) / SAMPLE_WG;
  int c = 0;
  while (c < chunks && !((c + 1 < chunks ? at[c + 1] : sum_e) > target)) ++c;
  int pick = last_positive;
  if (c < chunks) {
    double cdf = at[c];
    const int end = min(V, (c + 1) * SAMPLE_WG);
    for (int v = c * SAMPLE_WG; v < end; ++v) {
      const float e = p[v];
      if (e <= 0.0f) continue;  // never a zero-weight index
      cdf += (double)e;
      if (cdf > target) {
        pick = v;
        break;
      }
    }
  }
  sample[r] = pick;
}

#endif  // cl_khr_fp64
