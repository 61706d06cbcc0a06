// Shared helpers of pp-offline's CUDA kernels. Weight dtypes: 0 = f32,
// 1 = bf16, 2 = f16 (the Go side's dtypeCode). Activations are float32
// views: a base pointer (row R0, column C0 of the buffer) and a row
// stride ld, in floats.
#pragma once
#include <cuda_fp16.h>

#define DT_F32 0
#define DT_BF16 1
#define DT_F16 2

__device__ __forceinline__ float bf16f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }

__device__ __forceinline__ float f16f(unsigned short h) { return __half2float(__ushort_as_half(h)); }

// ldw is element i of a weight of dtype dt, widened exactly.
__device__ __forceinline__ float ldw(const void* w, int dt, long long i) {
  if (dt == DT_BF16) return bf16f(((const unsigned short*)w)[i]);
  if (dt == DT_F16) return f16f(((const unsigned short*)w)[i]);
  return ((const float*)w)[i];
}

// rne_bf16 rounds f to bf16 as the CPU's bf16 mode does (VCVTNEPS2BF16:
// denormals to signed zero, NaN quieted).
__device__ __forceinline__ unsigned rne_bf16(float f) {
  unsigned b = __float_as_uint(f);
  unsigned e = b & 0x7f800000u;
  if (e == 0) return (b >> 16) & 0x8000u;
  if (e == 0x7f800000u) return (b & 0x7fffffu) ? ((b >> 16) | 0x40u) : (b >> 16);
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

__device__ __forceinline__ float act_apply(float v, int act) {
  if (act == 0) return v / (1.0f + expf(-v));                             // SiLU
  if (act == 1) return (float)(0.5 * (double)v * (1.0 + erf((double)v / 1.4142135623730951)));  // GELU (erf)
  return fmaxf(v, 0.0f);                                                  // ReLU
}

// block_sum reduces v over the block (blockDim.x a multiple of 32, at most
// 1024) in a fixed order; every thread gets the sum.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) scratch[w] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < nw; i++) s += scratch[i];
  return s;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (l == 0) scratch[w] = v;
  __syncthreads();
  float s = scratch[0];
  for (int i = 1; i < nw; i++) s = fmaxf(s, scratch[i]);
  return s;
}
