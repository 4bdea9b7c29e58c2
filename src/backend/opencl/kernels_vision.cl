// The vision tower's ops on the OpenCL backend (docs/opencl.md §3; ops/op.h
// affine, pool_cells, scatter_rows; docs/model.md §7): one work-item per
// output element.

// affine: out[m, h] = (x[m, h] - shift[h]) · scale[h], each step rounded to fp32.
#define AFFINE(S, C)                                                                                         \
  __kernel void affine_##S##_##C(__global const float* x, __global const WTYPE_##S* shift,                  \
                                 __global const WTYPE_##C* scale, __global float* out, int H, int n) {      \
    const int g = get_global_id(0);                                                                        \
    if (g >= n) return;                                                                                    \
    const int h = g % H;                                                                                   \
    const float centred = x[g] - WLOAD_##S(shift, h);                                                      \
    out[g] = centred * WLOAD_##C(scale, h);                                                                \
  }
AFFINE(f32, f32)
AFFINE(f32, bf16)
AFFINE(f32, f16)
AFFINE(bf16, f32)
AFFINE(bf16, bf16)
AFFINE(bf16, f16)
AFFINE(f16, f32)
AFFINE(f16, bf16)
AFFINE(f16, f16)

// pool_cells: out[c, h] = Σ over the rows r with cells[r] = c, in row order,
// of fp32(x[r, h] · scale). A cell id outside [0, C) (only from a device
// input: the host checks the ids it holds) adds to no row.
__kernel void pool_cells(__global const float* x, __global const int* cells, __global float* out, int N, int H,
                         float scale, int n) {
  const int g = get_global_id(0);
  if (g >= n) return;
  const int c = g / H, h = g - c * H;
  float acc = 0.0f;
  for (int r = 0; r < N; ++r)
    if (cells[r] == c) {
      const float v = x[(size_t)r * (size_t)H + (size_t)h] * scale;
      acc += v;
    }
  out[g] = acc;
}

// scatter_rows: out (a copy of base) gets src[i] in row rows[i]; one
// work-item per element of src. A row outside [0, T) is left out.
__kernel void scatter_rows(__global const float* src, __global const int* rows, __global float* out, int T, int H,
                           int n) {
  const int g = get_global_id(0);
  if (g >= n) return;
  const int i = g / H, h = g - i * H;
  const int r = rows[i];
  if (r >= 0 && r < T) out[(size_t)r * (size_t)H + (size_t)h] = src[g];
}
