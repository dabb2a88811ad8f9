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
void zero(float *c) {
  float t[1024];
  for (int i = 0; i < 1024; i++) t[i] = (float)(0.0);
  for (int r = 0; r < 32; r++) for (int c = 0; c < 32; c++) c[r * 32 + c] = t[r * 32 + c];
}

void mm_acc(uint16_t *a, uint16_t *b, float *c) {
  float ta[1024];
  float tb[1024];
  float acc[1024];
  float tp[1024];
  float tc[1024];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 32; c++) ta[r * 32 + c] = pto_bf16_load(a[r * 32 + c]);
  for (int r = 0; r < 32; r++) for (int c = 0; c < 32; c++) tb[r * 32 + c] = pto_bf16_load(b[r * 32 + c]);
  for (int i = 0; i < 32; i++) for (int j = 0; j < 32; j++) { float acc = 0.0f; for (int k = 0; k < 32; k++) acc += ta[i * 32 + k] * tb[k * 32 + j]; acc[i * 32 + j] = acc; }
  for (int i = 0; i < 1024; i++) tp[i] = acc[i];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 32; c++) tc[r * 32 + c] = (float)(c[r * 32 + c]);
  for (int i = 0; i < 1024; i++) tc[i] = tc[i] + tp[i];
  for (int r = 0; r < 32; r++) for (int c = 0; c < 32; c++) c[r * 32 + c] = tc[r * 32 + c];
}

}
