// A stand-in for the CCE device compiler's built-ins, so that g++ can parse PTO-ISA's a2a3
// templates (include/pto/npu/a2a3) and pto-wsp's emitted device kernels with -fsyntax-only:
// PTO-ISA's static assertions (tile locations, element types, layouts, TASSIGN capacities and
// alignment) then judge the kernels without a device compiler. Written for pto-wsp's tests
// (tests/device.rs); it declares names and types only, nothing here runs.
//
// Used with: -include cce_stub.hpp -D__CCE_AICORE__=220 -D__NPU_ARCH__=2201
// -D__DAV_CUBE__ (or -D__DAV_VEC__) -I shim -I <PTO-ISA>/include; `shim/pto/common/type.hpp`
// wraps PTO-ISA's header of that name (see there).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

// Address-space and function qualifiers of the device compiler: nothing for g++.
#define __gm__
#define __ubuf__
#define __cbuf__
#define __ca__
#define __cb__
#define __cc__
#define __fbuf__
#define __tf__
#define __in__
#define __out__
#define __aicore__
#define __cce_get_tile_ptr(x) (x)

using std::size_t;

// Element types the device compiler provides.
typedef _Float16 half;
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float) {}
    operator float() const { return 0.0f; }
};
typedef half float16_t;
typedef float float32_t;

// Pipes, events and the enumerations the a2a3 headers pass to built-ins.
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_MTE4, PIPE_MTE5, PIPE_V2, PIPE_FIX };
enum event_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
enum QuantMode_t : uint64_t {
    NoQuant, DEQF16, F322BF16, F322F16, QF322B8_PRE, QF322BF16_PRE, QF322F16_PRE, REQ8, SHIFTS322S16, VDEQF16,
    VQF322B8_PRE, VREQ8, VSHIFTS322S16
};
enum addr_cal_mode_t { INC = 0 };
enum ub_addr8_t { VA0, VA1, VA2, VA3, VA4, VA5, VA6, VA7 };
enum vcmp_mode_t { ONLY_VALUE, VALUE_INDEX };
enum mem_dsb_t { DSB_ALL, DSB_DDR, DSB_UB, DSB_SEQ };
enum cache_line_t { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum dcci_dst_t { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT };
enum atomic_type_t { ATOMIC_NONE, ATOMIC_SUM, ATOMIC_S32, ATOMIC_F32, ATOMIC_F16 };
enum pad_t { PAD_NONE };

// What a built-in returns when its value is used: converts to whatever is asked.
struct cce_any {
    template <class T>
    constexpr operator T() const { return T{}; }
};

// The synchronisation built-ins, with their real signatures (the emitted kernels call them).
inline void set_flag(pipe_t, pipe_t, event_t) {}
inline void wait_flag(pipe_t, pipe_t, event_t) {}
inline void pipe_barrier(pipe_t) {}

template <class T> constexpr T max(T a, T b) { return a < b ? b : a; }
template <class T> constexpr T min(T a, T b) { return a < b ? a : b; }

// Every other built-in the a2a3 headers call: any arguments (and explicit template arguments).
#define PTO_WSP_CCE_BUILTIN(R, name) \
    template <class... T, class... A> inline R name(A &&...) { return {}; }

PTO_WSP_CCE_BUILTIN(uint64_t, get_block_idx)
PTO_WSP_CCE_BUILTIN(uint64_t, get_block_num)
PTO_WSP_CCE_BUILTIN(uint64_t, get_coreid)
PTO_WSP_CCE_BUILTIN(uint64_t, get_ctrl)
PTO_WSP_CCE_BUILTIN(uint64_t, get_imm)
PTO_WSP_CCE_BUILTIN(uint64_t, get_subblockdim)
PTO_WSP_CCE_BUILTIN(uint64_t, get_subblockid)
PTO_WSP_CCE_BUILTIN(uint64_t, get_vms4_sr)
PTO_WSP_CCE_BUILTIN(uint64_t, sbitset0)
PTO_WSP_CCE_BUILTIN(uint64_t, sbitset1)
PTO_WSP_CCE_BUILTIN(cce_any, copy_cbuf_to_bt)
PTO_WSP_CCE_BUILTIN(cce_any, copy_cbuf_to_fbuf)
PTO_WSP_CCE_BUILTIN(cce_any, copy_cbuf_to_gm)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_cbuf)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_cbuf_multi_nd2nz_b16)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_cbuf_multi_nd2nz_b32s)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_cbuf_multi_nd2nz_b8)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_ubuf_align_b16)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_ubuf_align_b32)
PTO_WSP_CCE_BUILTIN(cce_any, copy_gm_to_ubuf_align_b8)
PTO_WSP_CCE_BUILTIN(cce_any, copy_matrix_cc_to_cbuf)
PTO_WSP_CCE_BUILTIN(cce_any, copy_matrix_cc_to_gm)
PTO_WSP_CCE_BUILTIN(cce_any, copy_ubuf_to_gm_align_b16)
PTO_WSP_CCE_BUILTIN(cce_any, copy_ubuf_to_gm_align_b32)
PTO_WSP_CCE_BUILTIN(cce_any, copy_ubuf_to_gm_align_b8)
PTO_WSP_CCE_BUILTIN(cce_any, copy_ubuf_to_ubuf)
PTO_WSP_CCE_BUILTIN(cce_any, create_cbuf_matrix)
PTO_WSP_CCE_BUILTIN(cce_any, dcci)
PTO_WSP_CCE_BUILTIN(cce_any, dsb)
PTO_WSP_CCE_BUILTIN(cce_any, ffts_cross_core_sync)
PTO_WSP_CCE_BUILTIN(cce_any, img2colv2_cbuf_to_ca)
PTO_WSP_CCE_BUILTIN(cce_any, img2colv2_cbuf_to_cb)
PTO_WSP_CCE_BUILTIN(cce_any, load_cbuf_to_ca)
PTO_WSP_CCE_BUILTIN(cce_any, load_cbuf_to_ca_transpose)
PTO_WSP_CCE_BUILTIN(cce_any, load_cbuf_to_cb)
PTO_WSP_CCE_BUILTIN(cce_any, load_cbuf_to_cb_transpose)
PTO_WSP_CCE_BUILTIN(cce_any, mad)
PTO_WSP_CCE_BUILTIN(cce_any, scatter_vnchwconv_b16)
PTO_WSP_CCE_BUILTIN(cce_any, scatter_vnchwconv_b32)
PTO_WSP_CCE_BUILTIN(cce_any, scatter_vnchwconv_b8)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_add)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_bf16)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_f16)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_f32)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_none)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_s16)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_s32)
PTO_WSP_CCE_BUILTIN(cce_any, set_atomic_s8)
PTO_WSP_CCE_BUILTIN(cce_any, set_cmpmask)
PTO_WSP_CCE_BUILTIN(cce_any, set_ctrl)
PTO_WSP_CCE_BUILTIN(cce_any, set_deqscale)
PTO_WSP_CCE_BUILTIN(cce_any, set_ffts_base_addr)
PTO_WSP_CCE_BUILTIN(cce_any, set_fmatrix)
PTO_WSP_CCE_BUILTIN(cce_any, set_fmatrix_b)
PTO_WSP_CCE_BUILTIN(cce_any, set_fpc)
PTO_WSP_CCE_BUILTIN(cce_any, set_l3d_rpt)
PTO_WSP_CCE_BUILTIN(cce_any, set_mask_count)
PTO_WSP_CCE_BUILTIN(cce_any, set_mask_norm)
PTO_WSP_CCE_BUILTIN(cce_any, set_mov_pad_val)
PTO_WSP_CCE_BUILTIN(cce_any, set_nd_para)
PTO_WSP_CCE_BUILTIN(cce_any, set_padding)
PTO_WSP_CCE_BUILTIN(cce_any, set_quant_pre)
PTO_WSP_CCE_BUILTIN(cce_any, set_st_atomic_cfg)
PTO_WSP_CCE_BUILTIN(cce_any, set_va_reg_sb)
PTO_WSP_CCE_BUILTIN(cce_any, set_vector_mask)
PTO_WSP_CCE_BUILTIN(cce_any, st_atomic)
PTO_WSP_CCE_BUILTIN(cce_any, vabs)
PTO_WSP_CCE_BUILTIN(cce_any, vadd)
PTO_WSP_CCE_BUILTIN(cce_any, vadds)
PTO_WSP_CCE_BUILTIN(cce_any, vand)
PTO_WSP_CCE_BUILTIN(cce_any, vbitsort)
PTO_WSP_CCE_BUILTIN(cce_any, vbrcb)
PTO_WSP_CCE_BUILTIN(cce_any, vcadd)
PTO_WSP_CCE_BUILTIN(cce_any, vcgadd)
PTO_WSP_CCE_BUILTIN(cce_any, vcgmax)
PTO_WSP_CCE_BUILTIN(cce_any, vcgmin)
PTO_WSP_CCE_BUILTIN(cce_any, vcmax)
PTO_WSP_CCE_BUILTIN(cce_any, vcmin)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpv_eq)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpv_ge)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpv_gt)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpv_le)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpv_lt)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpv_ne)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpvs_eq)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpvs_ge)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpvs_gt)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpvs_le)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpvs_lt)
PTO_WSP_CCE_BUILTIN(cce_any, vcmpvs_ne)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_bf162f32)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_bf162s32a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_bf162s32c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_bf162s32f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_bf162s32r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_bf162s32z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_deq)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162f32)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s16a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s16c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s16f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s16r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s16z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s32a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s32c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s32f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s32r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s32z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s8a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s8c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s8f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s8r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162s8z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162u8a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162u8c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162u8f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162u8r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f162u8z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322bf16a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322bf16c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322bf16f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322bf16r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322bf16z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f16a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f16c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f16f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f16o)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f16r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f16z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f32a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f32c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f32f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f32r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322f32z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s16a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s16c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s16f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s16r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s16z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s32a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s32c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s32f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s32r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s32z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s64a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s64c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s64f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s64r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_f322s64z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f16)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f16a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f16c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f16f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f16r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f16z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s162f32)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322f32)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322f32a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322f32c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322f32f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322f32r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322f32z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322s16)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s322s64)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s642f32a)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s642f32c)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s642f32f)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s642f32r)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s642f32z)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s642s32)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_s82f16)
PTO_WSP_CCE_BUILTIN(cce_any, vconv_u82f16)
PTO_WSP_CCE_BUILTIN(cce_any, vcopy)
PTO_WSP_CCE_BUILTIN(cce_any, vdiv)
PTO_WSP_CCE_BUILTIN(cce_any, vector_dup)
PTO_WSP_CCE_BUILTIN(cce_any, vexp)
PTO_WSP_CCE_BUILTIN(cce_any, vgather)
PTO_WSP_CCE_BUILTIN(cce_any, vgatherb)
PTO_WSP_CCE_BUILTIN(cce_any, vln)
PTO_WSP_CCE_BUILTIN(cce_any, vlrelu)
PTO_WSP_CCE_BUILTIN(cce_any, vmax)
PTO_WSP_CCE_BUILTIN(cce_any, vmaxs)
PTO_WSP_CCE_BUILTIN(cce_any, vmin)
PTO_WSP_CCE_BUILTIN(cce_any, vmins)
PTO_WSP_CCE_BUILTIN(cce_any, vmrgsort4)
PTO_WSP_CCE_BUILTIN(cce_any, vmul)
PTO_WSP_CCE_BUILTIN(cce_any, vmuls)
PTO_WSP_CCE_BUILTIN(cce_any, vnot)
PTO_WSP_CCE_BUILTIN(cce_any, vor)
PTO_WSP_CCE_BUILTIN(cce_any, vreducev2)
PTO_WSP_CCE_BUILTIN(cce_any, vrelu)
PTO_WSP_CCE_BUILTIN(cce_any, vrsqrt)
PTO_WSP_CCE_BUILTIN(cce_any, vsel)
PTO_WSP_CCE_BUILTIN(cce_any, vshl)
PTO_WSP_CCE_BUILTIN(cce_any, vshr)
PTO_WSP_CCE_BUILTIN(cce_any, vsqrt)
PTO_WSP_CCE_BUILTIN(cce_any, vsub)
PTO_WSP_CCE_BUILTIN(cce_any, wait_flag_dev)
