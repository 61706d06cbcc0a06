// Shared helpers of pp-offline's CUDA kernels. Weight dtypes: 0 = f32,
// 1 = bf16, 2 = f16, 3 = q8_0, 4 = q4_K (the Go side's dtypeCode; the block
// formats are llama.cpp's, see infer/weights/quant.go). Activations are float32
// views: a base pointer (row R0, column C0 of the buffer) and a row
// stride ld, in floats.
#pragma once
#include <cuda_fp16.h>

#define DT_F32 0
#define DT_BF16 1
#define DT_F16 2
#define DT_Q8_0 3
#define DT_Q4_K 4

__device__ __forceinline__ float bf16f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }

__host__ __device__ __forceinline__ float f16f(unsigned short h) {
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}

// ldw is element i of a weight of dtype dt, widened exactly.
__device__ __forceinline__ float ldw(const void* w, int dt, long long i) {
  if (dt == DT_BF16) return bf16f(((const unsigned short*)w)[i]);
  if (dt == DT_F16) return f16f(((const unsigned short*)w)[i]);
  return ((const float*)w)[i];
}

// row_bytes is the storage of a K-element row of dtype dt (a block format
// pads the row to whole blocks).
__host__ __device__ __forceinline__ long long row_bytes(int dt, int K) {
  if (dt == DT_Q8_0) return (long long)((K + 31) / 32) * 34;
  if (dt == DT_Q4_K) return (long long)((K + 255) / 256) * 144;
  return (long long)K * (dt == DT_F32 ? 4 : 2);
}

// q8_0_8 widens elements [k, k+8) (k % 8 == 0) of a Q8_0 row: d·q, exact.
// The block helpers also run on the host: TestBlockWideningOnHost compiles
// them with nvcc and checks their bits against the Go dequantization.
__host__ __device__ __forceinline__ void q8_0_8(const unsigned char* row, int k, int K, float* o) {
  const unsigned char* b = row + (k / 32) * 34;
  float d = f16f((unsigned short)(b[0] | (b[1] << 8)));
  const signed char* q = (const signed char*)(b + 2 + k % 32);
#pragma unroll
  for (int e = 0; e < 8; e++) o[e] = k + e < K ? d * (float)q[e] : 0.0f;
}

// q4_k_8 widens elements [k, k+8) (k % 8 == 0) of a Q4_K row: (d·sc)·q −
// dmin·m, as the CPU computes it: every product is exact (11 × 6 × 4
// significant bits), so the one rounding is the subtraction's, contracted
// into an FMA or not.
__host__ __device__ __forceinline__ void q4_k_8(const unsigned char* row, int k, int K, float* o) {
  const unsigned char* b = row + (k / 256) * 144;
  int j = (k % 256) / 32;  // sub-block
  const unsigned char* s = b + 4;
  unsigned sc, m;
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
  float ds = f16f((unsigned short)(b[0] | (b[1] << 8))) * (float)sc;
  float ms = f16f((unsigned short)(b[2] | (b[3] << 8))) * (float)m;
  const unsigned char* q = b + 16 + (j / 2) * 32 + k % 32;
  int sh = (j & 1) * 4;
#pragma unroll
  for (int e = 0; e < 8; e++) o[e] = k + e < K ? ds * (float)((q[e] >> sh) & 15) - ms : 0.0f;
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
