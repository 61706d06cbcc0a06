// Element-wise ops over rows × cols views: copies, scaled adds, gating,
// activations, RoPE at a position per row, embedding sums.
#include "common.cuh"

// Grid: (ceil(cols / blockDim.x), rows).
extern "C" __global__ void copy2d(float* d, int ldd, const float* s, int lds, int rows, int cols) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (j < cols && r < rows) d[(long long)r * ldd + j] = s[(long long)r * lds + j];
}

// dst[r] += scale ⊙ src[r] (scale null: dst[r] += src[r]).
extern "C" __global__ void add_scaled(float* d, int ldd, const float* s, int lds, int rows, int cols, const void* scale, int sdt) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (j >= cols || r >= rows) return;
  float v = s[(long long)r * lds + j];
  if (scale) v = ldw(scale, sdt, j) * v;
  d[(long long)r * ldd + j] += v;
}

// dst[r][j] = act(src[r][j]) · src[r][h + j] for j < h (dst may alias src's
// first h columns: each thread reads its two inputs before writing).
extern "C" __global__ void gate(float* d, int ldd, const float* s, int lds, int rows, int h, int act) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (j >= h || r >= rows) return;
  const float* sr = s + (long long)r * lds;
  float a = sr[j], g = sr[h + j];
  d[(long long)r * ldd + j] = act_apply(a, act) * g;
}

extern "C" __global__ void activate(float* x, int ld, int rows, int cols, int act) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (j < cols && r < rows) {
    float* p = x + (long long)r * ld + j;
    *p = act_apply(*p, act);
  }
}

// RoPE: every dh-wide head of row r, interleaved pairs, for position
// pos[r]; freqs are the CPU's table (ops.NewRoPE), angles rounded to
// float32 and cos/sin taken in double as the CPU does. Grid: (ceil(cols/2 /
// blockDim.x), rows).
extern "C" __global__ void rope(float* x, int ld, int rows, int cols, int dh, const float* freqs, const int* pos) {
  int p = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  int heads = cols / dh, half = dh / 2;
  if (r >= rows || p >= heads * half) return;
  int h = p / half, i = p % half;
  float a = freqs[i] * (float)pos[r];
  float c = (float)cos((double)a), s = (float)sin((double)a);
  float* q = x + (long long)r * ld + h * dh + 2 * i;
  float xr = q[0], xi = q[1];
  q[0] = xr * c - xi * s;
  q[1] = xr * s + xi * c;
}

// embed_sum: dst[r] = (accumulate ? dst[r] : 0) + rows[r][0] + rows[r][1] +
// …, in table order, from nt gathered table rows per row (src[r][k][cols],
// uploaded by the host; a ZeroToken's row is skipped: mask bit k of
// use[r]).
extern "C" __global__ void embed_sum(float* d, int ldd, const float* src, const unsigned* use, int rows, int cols, int nt, int accumulate) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (j >= cols || r >= rows) return;
  float* o = d + (long long)r * ldd + j;
  float v = accumulate ? *o : 0.0f;
  const float* s = src + (long long)r * nt * cols + j;
  for (int k = 0; k < nt; k++)
    if (use[r * ((nt + 31) / 32) + k / 32] >> (k % 32) & 1u) v += s[(long long)k * cols];
  *o = v;
}
