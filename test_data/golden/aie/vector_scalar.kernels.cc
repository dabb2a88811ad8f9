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
void vscale(float *x, float *y, float s) {
  float t[1024];
  for (int r = 0; r < 1; r++) for (int c = 0; c < 1024; c++) t[r * 1024 + c] = (float)(x[r * 1024 + c]);
  for (int i = 0; i < 1024; i++) t[i] = t[i] * (float)(s);
  for (int r = 0; r < 1; r++) for (int c = 0; c < 1024; c++) y[r * 1024 + c] = t[r * 1024 + c];
}

}
