// Kernels of an AIE design, written by pto-wsp from kernels in tile instructions.
// Plain scalar C++ over row-major tiles; build with an AIE C++ compiler into the object file the
// design's cores link (`link_with`).
#include <stdint.h>
#include <math.h>

static inline float pto_bf16_load(uint16_t v) {
  uint32_t b = (uint32_t)v << 16;
  float f;
  __builtin_memcpy(&f, &b, 4);
  return f;
}

static inline uint16_t pto_bf16_store(float f) {
  uint32_t b;
  __builtin_memcpy(&b, &f, 4);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

extern "C" {
void load_tile(float *src, float *dst) {
  float t[2048];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 64; c++) t[r * 64 + c] = (float)(src[r * 64 + c]);
  for (int r = 0; r < 32; r++) for (int c = 0; c < 64; c++) dst[r * 64 + c] = t[r * 64 + c];
}

void silu_tile(float *x, float *y) {
  float tx[2048];
  float te[2048];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 64; c++) tx[r * 64 + c] = (float)(x[r * 64 + c]);
  for (int i = 0; i < 2048; i++) te[i] = -tx[i];
  for (int i = 0; i < 2048; i++) te[i] = expf(te[i]);
  for (int i = 0; i < 2048; i++) te[i] = te[i] + (float)(1.0);
  for (int i = 0; i < 2048; i++) tx[i] = tx[i] / te[i];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 64; c++) y[r * 64 + c] = tx[r * 64 + c];
}

void store_tile(float *src, float *dst) {
  float t[2048];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 64; c++) t[r * 64 + c] = (float)(src[r * 64 + c]);
  for (int r = 0; r < 32; r++) for (int c = 0; c < 64; c++) dst[r * 64 + c] = t[r * 64 + c];
}

}
