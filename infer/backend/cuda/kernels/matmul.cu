// Matrix products y[b] = W·x[b] (F.linear without bias) for a batch of B
// rows, float32 accumulation. Every kernel reduces each output element in
// an order fixed by K alone, so a row's result never depends on B, on its
// place in the batch or on the other rows (the backend's batching
// contract).
#include "common.cuh"

// widen8 widens the 16 (f32: 32) bytes a (, b) of 8 weight elements.
template <int DT>
__device__ __forceinline__ void widen8(uint4 a, uint4 b, float* o) {
  if (DT == DT_F32) {
    o[0] = __uint_as_float(a.x); o[1] = __uint_as_float(a.y); o[2] = __uint_as_float(a.z); o[3] = __uint_as_float(a.w);
    o[4] = __uint_as_float(b.x); o[5] = __uint_as_float(b.y); o[6] = __uint_as_float(b.z); o[7] = __uint_as_float(b.w);
    return;
  }
  unsigned v[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    unsigned short lo = v[i] & 0xffffu, hi = v[i] >> 16;
    o[2 * i] = DT == DT_BF16 ? bf16f(lo) : f16f(lo);
    o[2 * i + 1] = DT == DT_BF16 ? bf16f(hi) : f16f(hi);
  }
}

// load8 widens weight elements [k, k+8) of one row (zero past K). vec: the
// row is 16-byte aligned and K % 8 == 0, so the loads are vectorised.
__device__ __forceinline__ void load8(const char* row, int dt, int k, int K, int vec, float* o) {
  if (dt == DT_Q8_0) {
    q8_0_8((const unsigned char*)row, k, K, o);
    return;
  }
  if (dt == DT_Q4_K) {
    q4_k_8((const unsigned char*)row, k, K, o);
    return;
  }
  if (vec) {
    uint4 a = __ldg((const uint4*)(row + (dt == DT_F32 ? 4ll : 2ll) * k));
    if (dt == DT_F32) widen8<DT_F32>(a, __ldg((const uint4*)(row + 4ll * k + 16)), o);
    else if (dt == DT_BF16) widen8<DT_BF16>(a, a, o);
    else widen8<DT_F16>(a, a, o);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) o[e] = k + e < K ? ldw(row, dt, k + e) : 0.0f;
}

// matmul_fma: the float32 path (every dtype, the block formats widened
// exactly as the CPU does; the parity path). One warp per
// output row n; lane l accumulates, per batch row, elements k = 256c + 8l + e
// in order (c, e), then the 32 partial sums are combined by a fixed xor
// tree. Batch rows go 8 at a time (the warp's weight row, read once from
// HBM per chunk of 8, stays in L1/L2 for the next chunk).
extern "C" __global__ void matmul_fma(float* y, int ldy, const float* x, int ldx, const void* w, int dt, int N, int K, int B, int vec) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * (blockDim.x >> 5) + warp;
  if (n >= N) return;
  const char* row = (const char*)w + (long long)n * row_bytes(dt, K);
  for (int b0 = 0; b0 < B; b0 += 8) {
    int nb = min(8, B - b0);
    float acc[8];
#pragma unroll
    for (int b = 0; b < 8; b++) acc[b] = 0.0f;
#pragma unroll 2
    for (int k = lane * 8; k < K; k += 256) {
      float wv[8];
      load8(row, dt, k, K, vec, wv);
#pragma unroll
      for (int b = 0; b < 8; b++) {
        if (b < nb) {
          const float* xr = x + (long long)(b0 + b) * ldx + k;
#pragma unroll
          for (int e = 0; e < 8; e++)
            if (k + e < K) acc[b] = fmaf(wv[e], xr[e], acc[b]);
        }
      }
    }
#pragma unroll
    for (int b = 0; b < 8; b++) {
      float v = acc[b];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && b < nb) y[(long long)(b0 + b) * ldy + n] = v;
    }
  }
}

// FMA_ROWS is the output rows a warp of matmul_fma_rows computes.
#define FMA_ROWS 4

// matmul_fma_rows: matmul_fma for B > 1, with the same sum for every
// output element (lane l accumulates k = 256c + 8l + e in order (c, e),
// then the same xor tree), so a row's bits are matmul_fma's for that row
// alone. matmul_fma reads 8 activations per FMA row and batch row: for
// B > 1 those loads, not the FMAs, bound it (1.8 TFLOP/s on an H200).
// Here a warp takes FMA_ROWS output rows, so each activation it loads
// (with two 16-byte loads where K % 8 == 0 and the rows of x are 16-byte
// aligned) feeds FMA_ROWS weight rows.
extern "C" __global__ void matmul_fma_rows(float* y, int ldy, const float* x, int ldx, const void* w, int dt, int N, int K, int B, int vec) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n0 = (blockIdx.x * (blockDim.x >> 5) + warp) * FMA_ROWS;
  if (n0 >= N) return;
  int nr = min(FMA_ROWS, N - n0);
  long long rb = row_bytes(dt, K);
  const char* rows[FMA_ROWS];
#pragma unroll
  for (int r = 0; r < FMA_ROWS; r++) rows[r] = (const char*)w + (long long)(n0 + min(r, nr - 1)) * rb;
  const int xv = (K & 7) == 0 && (ldx & 3) == 0 && ((unsigned long long)x & 15) == 0;
  for (int b0 = 0; b0 < B; b0 += 8) {
    int nb = min(8, B - b0);
    float acc[FMA_ROWS][8];
#pragma unroll
    for (int r = 0; r < FMA_ROWS; r++)
#pragma unroll
      for (int b = 0; b < 8; b++) acc[r][b] = 0.0f;
#pragma unroll 1
    for (int k = lane * 8; k < K; k += 256) {
      float wv[FMA_ROWS][8];
#pragma unroll
      for (int r = 0; r < FMA_ROWS; r++) load8(rows[r], dt, k, K, vec, wv[r]);
#pragma unroll
      for (int b = 0; b < 8; b++) {
        if (b >= nb) break;
        const float* xr = x + (long long)(b0 + b) * ldx + k;
        float xe[8];
        if (xv) {
          float4 p = __ldg((const float4*)xr), q = __ldg((const float4*)xr + 1);
          xe[0] = p.x; xe[1] = p.y; xe[2] = p.z; xe[3] = p.w;
          xe[4] = q.x; xe[5] = q.y; xe[6] = q.z; xe[7] = q.w;
        } else {
#pragma unroll
          for (int e = 0; e < 8; e++) xe[e] = k + e < K ? xr[e] : 0.0f;
        }
#pragma unroll
        for (int e = 0; e < 8; e++) {
          if (k + e < K) {
#pragma unroll
            for (int r = 0; r < FMA_ROWS; r++) acc[r][b] = fmaf(wv[r][e], xe[e], acc[r][b]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < FMA_ROWS; r++)
#pragma unroll
      for (int b = 0; b < 8; b++) {
        float v = acc[r][b];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0 && r < nr && b < nb) y[(long long)(b0 + b) * ldy + n0 + r] = v;
      }
  }
}

// dot_vec is lane's partial sum of one float-dtype row (vec: 16-byte
// aligned, K % 8 == 0) with one 16-byte-aligned activation row, in
// matmul_fma's order. Each pass issues the loads of U chunks (U × 16 or 32 bytes
// of weights a lane, and their activations) before the FMAs of the first:
// at B = 1 the product streams the weights, and the bytes a warp has in
// flight are what bound it (one chunk at a time read the H200's HBM at
// ~1.4 TB/s).
template <int DT, int U>
__device__ __forceinline__ float dot_vec(const char* row, const float* x, int K, int lane) {
  constexpr int EB = DT == DT_F32 ? 4 : 2;
  float acc = 0.0f;
  for (int c0 = lane * 8; c0 < K; c0 += 256 * U) {
    uint4 wa[U], wb[U];
    float4 xa[U], xb[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      int k = c0 + 256 * u;
      if (k < K) {
        const char* p = row + (long long)EB * k;
        wa[u] = __ldg((const uint4*)p);
        wb[u] = EB == 4 ? __ldg((const uint4*)(p + 16)) : make_uint4(0, 0, 0, 0);
        xa[u] = __ldg((const float4*)(x + k));
        xb[u] = __ldg((const float4*)(x + k) + 1);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (c0 + 256 * u < K) {
        float wv[8];
        widen8<DT>(wa[u], wb[u], wv);
        float xe[8] = {xa[u].x, xa[u].y, xa[u].z, xa[u].w, xb[u].x, xb[u].y, xb[u].z, xb[u].w};
#pragma unroll
        for (int e = 0; e < 8; e++) acc = fmaf(wv[e], xe[e], acc);
      }
    }
  }
  return acc;
}

// matmul_fma_vec: matmul_fma at B = 1 for a float-dtype weight (vec) and a
// 16-byte-aligned activation row, with the same sum (dot_vec). A kernel of
// its own, so that its register count (and so the warps an SM holds) is
// not the general loop's. The weight is argument 4, as in the others.
extern "C" __global__ void matmul_fma_vec(float* y, const float* x, int N, int K, const void* w, int dt) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int n = blockIdx.x * (blockDim.x >> 5) + warp;
  if (n >= N) return;
  const char* row = (const char*)w + (long long)n * row_bytes(dt, K);
  float v = dt == DT_F32 ? dot_vec<DT_F32, 2>(row, x, K, lane)
          : dt == DT_BF16 ? dot_vec<DT_BF16, 4>(row, x, K, lane)
                          : dot_vec<DT_F16, 4>(row, x, K, lane);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) y[n] = v;
}

#define MMA_WARPS 8

__device__ __forceinline__ void mma_bf16(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// w8 loads weight elements [k, k+8) of row n as four bf16 pairs (zero past
// K or past N; vec: K % 8 == 0, so k < K means the whole 16 bytes are in
// the row).
__device__ __forceinline__ uint4 w8(const unsigned short* w, int n, int N, int k, int K, int vec) {
  if (n >= N || k >= K) return make_uint4(0, 0, 0, 0);
  const unsigned short* p = w + (long long)n * K + k;
  if (vec) return __ldg((const uint4*)p);
  unsigned v[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    unsigned lo = k + 2 * i < K ? p[2 * i] : 0u, hi = k + 2 * i + 1 < K ? p[2 * i + 1] : 0u;
    v[i] = lo | (hi << 16);
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}

// x8 rounds activations [k, k+8) of batch row b to bf16 pairs (zero past K
// or past B).
__device__ __forceinline__ uint4 x8(const float* x, int ldx, int b, int B, int k, int K) {
  if (b >= B) return make_uint4(0, 0, 0, 0);
  const float* p = x + (long long)b * ldx + k;
  unsigned v[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    unsigned lo = k + 2 * i < K ? rne_bf16(p[2 * i]) : 0u, hi = k + 2 * i + 1 < K ? rne_bf16(p[2 * i + 1]) : 0u;
    v[i] = lo | (hi << 16);
  }
  return make_uint4(v[0], v[1], v[2], v[3]);
}

// matmul_mma_bf16: bf16 weights with activations rounded to bf16 (the bf16
// compute mode), on tensor cores: mma.sync m16n8k16, W as the row-major A
// operand (16 output rows), the batch as the column-major B operand (8 rows
// of x). A block of MMA_WARPS warps owns 16 output rows × 8 batch rows;
// warp w takes the 32-wide K chunks w, w+8, …, and the warps' sums are
// added in warp order. Within a chunk, thread (g = lane/4, t = lane%4)
// loads 8 consecutive elements [32c + 8t, +8) of its rows with one 16-byte
// load and feeds them to two mma as the fragments' k pairs {2t, 2t+1,
// 2t+8, 2t+9}: A and B use the same permutation of k, so the sum is the
// product's. Memory-bound at small B (each weight read once for the 8
// rows); for B > 8 the grid's y dimension takes further groups of 8.
extern "C" __global__ void matmul_mma_bf16(float* y, int ldy, const float* x, int ldx, const unsigned short* w, int N, int K, int B, int vec) {
  __shared__ float red[MMA_WARPS][32][4];
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int g = lane >> 2, t = lane & 3;
  int n0 = blockIdx.x * 16, b0 = blockIdx.y * 8;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int chunks = (K + 31) / 32;
#pragma unroll 2
  for (int ch = warp; ch < chunks; ch += MMA_WARPS) {
    int k = ch * 32 + 8 * t;
    uint4 wa = w8(w, n0 + g, N, k, K, vec);
    uint4 wb = w8(w, n0 + g + 8, N, k, K, vec);
    uint4 xb = x8(x, ldx, b0 + g, B, k, K);
    mma_bf16(c, wa.x, wb.x, wa.y, wb.y, xb.x, xb.y);
    mma_bf16(c, wa.z, wb.z, wa.w, wb.w, xb.z, xb.w);
  }
#pragma unroll
  for (int i = 0; i < 4; i++) red[warp][lane][i] = c[i];
  __syncthreads();
  if (warp != 0) return;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int v = 0; v < MMA_WARPS; v++)
#pragma unroll
    for (int i = 0; i < 4; i++) s[i] += red[v][lane][i];
  // c0, c1: output row g, batch columns 2t, 2t+1; c2, c3: row g+8.
#pragma unroll
  for (int i = 0; i < 4; i++) {
    int n = n0 + g + (i >= 2 ? 8 : 0), b = b0 + 2 * t + (i & 1);
    if (n < N && b < B) y[(long long)b * ldy + n] = s[i];
  }
}
