// router_topk of the OpenCL backend (docs/opencl.md §3): the router of
// docs/model.md §1.5, r = RMSNorm_noscale(x) ⊙ scale · H^-1/2,
// p = softmax(r · projᵀ), the top k of p, renormalized and multiplied by
// per_expert_scale.

// Element i of a weight in its stored dtype, given at run time (0 f32, 1 bf16,
// 2 f16): the router's three weights need not share one.
float router_weight(__global const uchar* w, int dtype, size_t i) {
  if (dtype == 1) return as_float(((uint)((__global const ushort*)w)[i]) << 16);
  if (dtype == 2) return vload_half(i, (__global const half*)w);
  return ((__global const float*)w)[i];
}

// One work-group of NORM_WG work-items per row m. Everything that decides the
// selection is computed in the reference's order of operations
// (backend/cpu/cpu_moe.cc), so that the probabilities, and with them the
// selected experts, are the reference's wherever exp rounds as the host's does:
//  - Σx² as the reference's dot_f32: four running sums (work-items 0-3) over
//    the elements 4i+c, the tail added to the first, then (s0+s1)+(s2+s3);
//  - r[h] = x[h] · inv · scale[h] · root into r_buf (one row of H);
//  - each expert's logit r · proj[e] in the same four-sum order, one expert
//    per work-item, into p_buf (one row of E);
//  - work-item 0: the maximum, exp and Σexp in expert order, the division,
//    then k rounds of selection: the largest p, the lower index on ties
//    (torch.topk's order, the reference's partial_sort), each round below the
//    previous pick in that order; the weights p / Σtop · per_expert_scale.
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void router_topk(
    __global const float* x, __global const uchar* scale, int scale_dtype, __global const uchar* proj, int proj_dtype,
    __global const uchar* per_expert_scale, int pes_dtype, __global float* r_buf, __global float* p_buf,
    __global int* idx, __global float* wts, int H, int E, int K, float eps, float root) {
  __local float chains[4];
  __local float inv_l;
  const int l = get_local_id(0);
  const size_t m = get_group_id(0);
  __global const float* xr = x + m * (size_t)H;
  __global float* r = r_buf + m * (size_t)H;
  __global float* p = p_buf + m * (size_t)E;
  const int n4 = H - H % 4;
  for (int c = l; c < 4; c += NORM_WG) {
    float s = 0.0f;
    for (int i = c; i < n4; i += 4) s += xr[i] * xr[i];
    chains[c] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l == 0) {
    float s0 = chains[0];
    for (int i = n4; i < H; ++i) s0 += xr[i] * xr[i];
    const float ss = (s0 + chains[1]) + (chains[2] + chains[3]);
    inv_l = 1.0f / sqrt(ss / (float)H + eps);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float inv = inv_l;
  for (int h = l; h < H; h += NORM_WG) r[h] = xr[h] * inv * router_weight(scale, scale_dtype, h) * root;
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int e = l; e < E; e += NORM_WG) {
    const size_t row = (size_t)e * (size_t)H;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int i = 0;
    for (; i + 4 <= H; i += 4) {
      s0 += r[i] * router_weight(proj, proj_dtype, row + i);
      s1 += r[i + 1] * router_weight(proj, proj_dtype, row + i + 1);
      s2 += r[i + 2] * router_weight(proj, proj_dtype, row + i + 2);
      s3 += r[i + 3] * router_weight(proj, proj_dtype, row + i + 3);
    }
    for (; i < H; ++i) s0 += r[i] * router_weight(proj, proj_dtype, row + i);
    p[e] = (s0 + s1) + (s2 + s3);
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (l != 0) return;
  float mx = -INFINITY;
  for (int e = 0; e < E; ++e) mx = mx < p[e] ? p[e] : mx;
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) {
    const float v = exp(p[e] - mx);
    p[e] = v;
    sum += v;
  }
  for (int e = 0; e < E; ++e) p[e] /= sum;
  __global int* ids = idx + m * (size_t)K;
  __global float* w = wts + m * (size_t)K;
  int prev = -1;
  float prev_p = 0.0f;
  for (int k = 0; k < K; ++k) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      if (k > 0 && !(p[e] < prev_p || (p[e] == prev_p && e > prev))) continue;  // at or before the previous pick
      if (best < 0 || p[e] > p[best]) best = e;
    }
    if (best < 0) {  // NaN probabilities order nothing: the lowest expert not yet taken
      for (int e = 0; e < E && best < 0; ++e) {
        best = e;
        for (int j = 0; j < k; ++j)
          if (ids[j] == e) best = -1;
      }
    }
    ids[k] = best;
    prev = best;
    prev_p = p[best];
  }
  float top = 0.0f;
  for (int k = 0; k < K; ++k) top += p[ids[k]];
  for (int k = 0; k < K; ++k) w[k] = p[ids[k]] / top * router_weight(per_expert_scale, pes_dtype, ids[k]);
}
