// Attention over ring KV caches on the device. A ring holds keys and values
// [heads][capacity][dh] (as the CPU's); position p is at slot p % capacity.
// Each row of a call has a descriptor (ringrow) the host uploads: its
// ring's keys and values, capacity, the ring's end after the writes it must
// see, its query position and, for the write kernel, the slot its key goes
// to.
#include "common.cuh"

struct ringrow {
  float* k;
  float* v;
  int cap, end, posq, slot;
};

// ring_position is backend.RingPosition exactly, quirk included: the slot at
// end % capacity holds position end (delta <= 0), so a full ring shows a
// query capacity − 1 past positions.
__device__ __forceinline__ int ring_position(int end, int cap, int j) {
  if (j >= end) return -1;
  int delta = j - end % cap;
  if (delta <= 0) return end + delta;
  return end + delta - cap;
}

__device__ __forceinline__ bool visible(int q, int k, int context) {
  int d = q - k;
  return k >= 0 && d >= 0 && (context <= 0 || d < context);
}

// ring_write stores row r's key and value (qkv[r] = q | k | v, heads·dh
// columns each) at its slot. Grid: (ceil(D / blockDim.x), rows).
extern "C" __global__ void ring_write(const ringrow* rr, const float* qkv, int ld, int rows, int heads, int dh) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  int D = heads * dh;
  if (j >= D || r >= rows) return;
  ringrow d = rr[r];
  int h = j / dh, e = j % dh;
  long long o = ((long long)h * d.cap + d.slot) * dh + e;
  const float* row = qkv + (long long)r * ld;
  d.k[o] = row[D + j];
  d.v[o] = row[2 * D + j];
}

// attend: softmax(q·kᵀ/√dh + mask)·v for row blockIdx.x, head blockIdx.y.
// Dynamic shared memory: cap + dh + 32 floats.
extern "C" __global__ void attend(float* out, int ldo, const ringrow* rr, const float* qkv, int ld, int heads, int dh, int context) {
  extern __shared__ float sh[];
  int r = blockIdx.x, h = blockIdx.y;
  ringrow d = rr[r];
  float* scores = sh;
  float* q = sh + d.cap;
  float* scratch = q + dh;
  const float* qr = qkv + (long long)r * ld + h * dh;
  for (int i = threadIdx.x; i < dh; i += blockDim.x) q[i] = qr[i];
  __syncthreads();
  float scale = (float)(1.0 / sqrt((double)dh));
  const float* kh = d.k + (long long)h * d.cap * dh;
  const float* vh = d.v + (long long)h * d.cap * dh;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < d.cap; j += blockDim.x) {
    float s = -INFINITY;
    if (visible(d.posq, ring_position(d.end, d.cap, j), context)) {
      const float* kr = kh + (long long)j * dh;
      float dot = 0.0f;
      for (int e = 0; e < dh; e++) dot = fmaf(q[e], kr[e], dot);
      s = dot * scale;
    }
    scores[j] = s;
    m = fmaxf(m, s);
  }
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < d.cap; j += blockDim.x) {
    float s = scores[j];
    float ex = s == -INFINITY ? 0.0f : (float)exp((double)(s - m));
    scores[j] = ex;
    sum += ex;
  }
  sum = block_sum(sum, scratch);
  __syncthreads();
  float inv = 1.0f / sum;
  float* o = out + (long long)r * ldo + h * dh;
  for (int e = threadIdx.x; e < dh; e += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < d.cap; j++) {
      float p = scores[j];
      if (p != 0.0f) acc = fmaf(p * inv, vh[(long long)j * dh + e], acc);
    }
    o[e] = acc;
  }
}

// fill_ring: the CPU's FillRing pattern over n floats of keys and values.
extern "C" __global__ void fill_ring(float* k, float* v, long long n) {
  long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  k[j] = (float)((int)(j % 13) - 6) * 0.01f;
  v[j] = (float)((int)(j % 7) - 3) * 0.01f;
}
