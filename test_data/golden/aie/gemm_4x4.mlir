module {
  aie.device(npu1_4col) {
    func.func private @zero(memref<32x32xf32>)
    func.func private @mm_acc(memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>)
    %tile_0_0 = aie.tile(0, 0)
    %tile_0_1 = aie.tile(0, 1)
    %tile_0_2 = aie.tile(0, 2)
    %tile_0_3 = aie.tile(0, 3)
    %tile_0_4 = aie.tile(0, 4)
    %tile_0_5 = aie.tile(0, 5)
    %tile_1_0 = aie.tile(1, 0)
    %tile_1_1 = aie.tile(1, 1)
    %tile_1_2 = aie.tile(1, 2)
    %tile_1_3 = aie.tile(1, 3)
    %tile_1_4 = aie.tile(1, 4)
    %tile_1_5 = aie.tile(1, 5)
    %tile_2_0 = aie.tile(2, 0)
    %tile_2_1 = aie.tile(2, 1)
    %tile_2_2 = aie.tile(2, 2)
    %tile_2_3 = aie.tile(2, 3)
    %tile_2_4 = aie.tile(2, 4)
    %tile_2_5 = aie.tile(2, 5)
    %tile_3_0 = aie.tile(3, 0)
    %tile_3_1 = aie.tile(3, 1)
    %tile_3_2 = aie.tile(3, 2)
    %tile_3_3 = aie.tile(3, 3)
    %tile_3_4 = aie.tile(3, 4)
    %tile_3_5 = aie.tile(3, 5)
    aie.objectfifo @A_in0(%tile_0_0, {%tile_0_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_bc0(%tile_0_1, {%tile_0_2, %tile_1_2, %tile_2_2, %tile_3_2}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_in1(%tile_1_0, {%tile_1_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_bc1(%tile_1_1, {%tile_0_3, %tile_1_3, %tile_2_3, %tile_3_3}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_in2(%tile_2_0, {%tile_2_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_bc2(%tile_2_1, {%tile_0_4, %tile_1_4, %tile_2_4, %tile_3_4}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_in3(%tile_3_0, {%tile_3_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @A_bc3(%tile_3_1, {%tile_0_5, %tile_1_5, %tile_2_5, %tile_3_5}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_in0(%tile_0_0, {%tile_0_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_bc0(%tile_0_1, {%tile_0_2, %tile_0_3, %tile_0_4, %tile_0_5}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_in1(%tile_1_0, {%tile_1_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_bc1(%tile_1_1, {%tile_1_2, %tile_1_3, %tile_1_4, %tile_1_5}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_in2(%tile_2_0, {%tile_2_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_bc2(%tile_2_1, {%tile_2_2, %tile_2_3, %tile_2_4, %tile_2_5}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_in3(%tile_3_0, {%tile_3_1}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @B_bc3(%tile_3_1, {%tile_3_2, %tile_3_3, %tile_3_4, %tile_3_5}, 2 : i32) : !aie.objectfifo<memref<32x32xbf16>>
    aie.objectfifo @C_0_2(%tile_0_2, {%tile_0_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_0_3(%tile_0_3, {%tile_0_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_0_4(%tile_0_4, {%tile_0_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_0_5(%tile_0_5, {%tile_0_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_out0(%tile_0_1, {%tile_0_0}, 2 : i32) : !aie.objectfifo<memref<128x32xf32>>
    aie.objectfifo @C_1_2(%tile_1_2, {%tile_1_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_1_3(%tile_1_3, {%tile_1_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_1_4(%tile_1_4, {%tile_1_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_1_5(%tile_1_5, {%tile_1_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_out1(%tile_1_1, {%tile_1_0}, 2 : i32) : !aie.objectfifo<memref<128x32xf32>>
    aie.objectfifo @C_2_2(%tile_2_2, {%tile_2_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_2_3(%tile_2_3, {%tile_2_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_2_4(%tile_2_4, {%tile_2_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_2_5(%tile_2_5, {%tile_2_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_out2(%tile_2_1, {%tile_2_0}, 2 : i32) : !aie.objectfifo<memref<128x32xf32>>
    aie.objectfifo @C_3_2(%tile_3_2, {%tile_3_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_3_3(%tile_3_3, {%tile_3_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_3_4(%tile_3_4, {%tile_3_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_3_5(%tile_3_5, {%tile_3_1}, 2 : i32) : !aie.objectfifo<memref<32x32xf32>>
    aie.objectfifo @C_out3(%tile_3_1, {%tile_3_0}, 2 : i32) : !aie.objectfifo<memref<128x32xf32>>
    aie.objectfifo.link [@A_in0] -> [@A_bc0]([] [])
    aie.objectfifo.link [@A_in1] -> [@A_bc1]([] [])
    aie.objectfifo.link [@A_in2] -> [@A_bc2]([] [])
    aie.objectfifo.link [@A_in3] -> [@A_bc3]([] [])
    aie.objectfifo.link [@B_in0] -> [@B_bc0]([] [])
    aie.objectfifo.link [@B_in1] -> [@B_bc1]([] [])
    aie.objectfifo.link [@B_in2] -> [@B_bc2]([] [])
    aie.objectfifo.link [@B_in3] -> [@B_bc3]([] [])
    aie.objectfifo.link [@C_0_2, @C_0_3, @C_0_4, @C_0_5] -> [@C_out0]([0, 1024, 2048, 3072] [])
    aie.objectfifo.link [@C_1_2, @C_1_3, @C_1_4, @C_1_5] -> [@C_out1]([0, 1024, 2048, 3072] [])
    aie.objectfifo.link [@C_2_2, @C_2_3, @C_2_4, @C_2_5] -> [@C_out2]([0, 1024, 2048, 3072] [])
    aie.objectfifo.link [@C_3_2, @C_3_3, @C_3_4, @C_3_5] -> [@C_out3]([0, 1024, 2048, 3072] [])
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_0_2(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc0(Consume, 1)
          aie.objectfifo.release @B_bc0(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_0_2(Produce, 1)
        aie.objectfifo.release @A_bc0(Consume, 1)
        aie.objectfifo.release @B_bc0(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_0_3 = aie.core(%tile_0_3) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_0_3(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc1(Consume, 1)
          aie.objectfifo.release @B_bc0(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_0_3(Produce, 1)
        aie.objectfifo.release @A_bc1(Consume, 1)
        aie.objectfifo.release @B_bc0(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_0_4 = aie.core(%tile_0_4) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_0_4(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc2(Consume, 1)
          aie.objectfifo.release @B_bc0(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_0_4(Produce, 1)
        aie.objectfifo.release @A_bc2(Consume, 1)
        aie.objectfifo.release @B_bc0(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_0_5 = aie.core(%tile_0_5) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_0_5(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc3(Consume, 1)
          aie.objectfifo.release @B_bc0(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_0_5(Produce, 1)
        aie.objectfifo.release @A_bc3(Consume, 1)
        aie.objectfifo.release @B_bc0(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_1_2(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc0(Consume, 1)
          aie.objectfifo.release @B_bc1(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_1_2(Produce, 1)
        aie.objectfifo.release @A_bc0(Consume, 1)
        aie.objectfifo.release @B_bc1(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_1_3 = aie.core(%tile_1_3) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_1_3(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc1(Consume, 1)
          aie.objectfifo.release @B_bc1(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_1_3(Produce, 1)
        aie.objectfifo.release @A_bc1(Consume, 1)
        aie.objectfifo.release @B_bc1(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_1_4 = aie.core(%tile_1_4) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_1_4(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc2(Consume, 1)
          aie.objectfifo.release @B_bc1(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_1_4(Produce, 1)
        aie.objectfifo.release @A_bc2(Consume, 1)
        aie.objectfifo.release @B_bc1(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_1_5 = aie.core(%tile_1_5) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_1_5(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc3(Consume, 1)
          aie.objectfifo.release @B_bc1(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_1_5(Produce, 1)
        aie.objectfifo.release @A_bc3(Consume, 1)
        aie.objectfifo.release @B_bc1(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_2_2(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc0(Consume, 1)
          aie.objectfifo.release @B_bc2(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_2_2(Produce, 1)
        aie.objectfifo.release @A_bc0(Consume, 1)
        aie.objectfifo.release @B_bc2(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_2_3 = aie.core(%tile_2_3) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_2_3(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc1(Consume, 1)
          aie.objectfifo.release @B_bc2(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_2_3(Produce, 1)
        aie.objectfifo.release @A_bc1(Consume, 1)
        aie.objectfifo.release @B_bc2(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_2_4 = aie.core(%tile_2_4) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_2_4(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc2(Consume, 1)
          aie.objectfifo.release @B_bc2(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_2_4(Produce, 1)
        aie.objectfifo.release @A_bc2(Consume, 1)
        aie.objectfifo.release @B_bc2(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_2_5 = aie.core(%tile_2_5) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_2_5(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc3(Consume, 1)
          aie.objectfifo.release @B_bc2(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_2_5(Produce, 1)
        aie.objectfifo.release @A_bc3(Consume, 1)
        aie.objectfifo.release @B_bc2(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_3_2(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc0(Consume, 1)
          aie.objectfifo.release @B_bc3(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc0(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_3_2(Produce, 1)
        aie.objectfifo.release @A_bc0(Consume, 1)
        aie.objectfifo.release @B_bc3(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_3_3 = aie.core(%tile_3_3) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_3_3(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc1(Consume, 1)
          aie.objectfifo.release @B_bc3(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc1(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_3_3(Produce, 1)
        aie.objectfifo.release @A_bc1(Consume, 1)
        aie.objectfifo.release @B_bc3(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_3_4 = aie.core(%tile_3_4) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_3_4(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc2(Consume, 1)
          aie.objectfifo.release @B_bc3(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc2(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_3_4(Produce, 1)
        aie.objectfifo.release @A_bc2(Consume, 1)
        aie.objectfifo.release @B_bc3(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    %core_3_5 = aie.core(%tile_3_5) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c3 = arith.constant 3 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        %0 = aie.objectfifo.acquire @C_3_5(Produce, 1) : !aie.objectfifosubview<memref<32x32xf32>>
        %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x32xf32>> -> memref<32x32xf32>
        func.call @zero(%1) : (memref<32x32xf32>) -> ()
        scf.for %iv1 = %c0 to %c3 step %c1 {
          %2 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          %4 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
          %5 = aie.objectfifo.subview.access %4[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
          func.call @mm_acc(%3, %5, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
          aie.objectfifo.release @A_bc3(Consume, 1)
          aie.objectfifo.release @B_bc3(Consume, 1)
        }
        %6 = aie.objectfifo.acquire @A_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %7 = aie.objectfifo.subview.access %6[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        %8 = aie.objectfifo.acquire @B_bc3(Consume, 1) : !aie.objectfifosubview<memref<32x32xbf16>>
        %9 = aie.objectfifo.subview.access %8[0] : !aie.objectfifosubview<memref<32x32xbf16>> -> memref<32x32xbf16>
        func.call @mm_acc(%7, %9, %1) : (memref<32x32xbf16>, memref<32x32xbf16>, memref<32x32xf32>) -> ()
        aie.objectfifo.release @C_3_5(Produce, 1)
        aie.objectfifo.release @A_bc3(Consume, 1)
        aie.objectfifo.release @B_bc3(Consume, 1)
      }
      aie.end
    } {link_with = "gemm_4x4.kernels.o"}
    aiex.runtime_sequence(%arg0: memref<16384xbf16>, %arg1: memref<16384xbf16>, %arg2: memref<16384xf32>) {
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 0][1, 4, 32, 32][0, 32, 128, 1]) {id = 0 : i64, metadata = @A_in0} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 4096][1, 4, 32, 32][0, 32, 128, 1]) {id = 1 : i64, metadata = @A_in1} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 8192][1, 4, 32, 32][0, 32, 128, 1]) {id = 2 : i64, metadata = @A_in2} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 12288][1, 4, 32, 32][0, 32, 128, 1]) {id = 3 : i64, metadata = @A_in3} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 0][1, 1, 128, 32][0, 0, 128, 1]) {id = 4 : i64, metadata = @B_in0} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 32][1, 1, 128, 32][0, 0, 128, 1]) {id = 5 : i64, metadata = @B_in1} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 64][1, 1, 128, 32][0, 0, 128, 1]) {id = 6 : i64, metadata = @B_in2} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 96][1, 1, 128, 32][0, 0, 128, 1]) {id = 7 : i64, metadata = @B_in3} : memref<16384xbf16>
      aiex.npu.dma_memcpy_nd(%arg2[0, 0, 0, 0][1, 1, 128, 32][0, 0, 128, 1]) {id = 8 : i64, issue_token = true, metadata = @C_out0} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg2[0, 0, 0, 32][1, 1, 128, 32][0, 0, 128, 1]) {id = 9 : i64, issue_token = true, metadata = @C_out1} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg2[0, 0, 0, 64][1, 1, 128, 32][0, 0, 128, 1]) {id = 10 : i64, issue_token = true, metadata = @C_out2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg2[0, 0, 0, 96][1, 1, 128, 32][0, 0, 128, 1]) {id = 11 : i64, issue_token = true, metadata = @C_out3} : memref<16384xf32>
      aiex.npu.dma_wait {symbol = @C_out0}
      aiex.npu.dma_wait {symbol = @C_out1}
      aiex.npu.dma_wait {symbol = @C_out2}
      aiex.npu.dma_wait {symbol = @C_out3}
    }
  }
}
