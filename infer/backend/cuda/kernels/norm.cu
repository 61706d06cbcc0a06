// RMSNorm and LayerNorm, one block per row (the CPU's formulas; the sums
// are block reductions in a fixed order).
#include "common.cuh"

extern "C" __global__ void rmsnorm(float* y, int ldy, const float* x, int ldx, int D, const void* w, int wdt, float eps) {
  __shared__ float scratch[32];
  const float* xr = x + (long long)blockIdx.x * ldx;
  float* yr = y + (long long)blockIdx.x * ldy;
  // Thread t sums x[i]² for i = t, t + blockDim.x, … in that order; the
  // loads go 8 at a time (one at a time, each waited for, the kernel took
  // ~9 µs for D = 4096 on an H200).
  float ss = 0.0f;
  const int s = blockDim.x;
  int i = threadIdx.x;
  for (; i + 7 * s < D; i += 8 * s) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = xr[i + j * s];
#pragma unroll
    for (int j = 0; j < 8; j++) ss = fmaf(v[j], v[j], ss);
  }
  for (; i < D; i += s) ss = fmaf(xr[i], xr[i], ss);
  ss = block_sum(ss, scratch);
  float r = (float)(1.0 / sqrt((double)(eps + ss / (float)D)));
#pragma unroll 8
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float a = w ? ldw(w, wdt, i) : 1.0f;
    yr[i] = xr[i] * (a * r);
  }
}

extern "C" __global__ void layernorm(float* y, int ldy, const float* x, int ldx, int D, const void* w, int wdt, const void* b, int bdt, float eps) {
  __shared__ float scratch[32];
  const float* xr = x + (long long)blockIdx.x * ldx;
  float* yr = y + (long long)blockIdx.x * ldy;
  float s = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) s += xr[i];
  float mean = block_sum(s, scratch) / (float)D;
  float v = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float d = xr[i] - mean;
    v = fmaf(d, d, v);
  }
  float var = block_sum(v, scratch) / (float)D;
  float r = (float)(1.0 / sqrt((double)(var + eps)));
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float o = (xr[i] - mean) * r;
    if (w) o *= ldw(w, wdt, i);
    if (b) o += ldw(b, bdt, i);
    yr[i] = o;
  }
}
