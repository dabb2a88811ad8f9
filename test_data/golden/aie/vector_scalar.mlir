module {
  aie.device(npu1_4col) {
    func.func private @vscale(memref<1x1024xf32>, memref<1x1024xf32>, f32)
    %tile_0_0 = aie.tile(0, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_1_0 = aie.tile(1, 0)
    %tile_1_2 = aie.tile(1, 2)
    %tile_2_0 = aie.tile(2, 0)
    %tile_2_2 = aie.tile(2, 2)
    %tile_3_0 = aie.tile(3, 0)
    %tile_3_2 = aie.tile(3, 2)
    aie.objectfifo @X_0_2(%tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @X_1_2(%tile_1_0, {%tile_1_2}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @X_2_2(%tile_2_0, {%tile_2_2}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @X_3_2(%tile_3_0, {%tile_3_2}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @Y_0_2(%tile_0_2, {%tile_0_0}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @Y_1_2(%tile_1_2, {%tile_1_0}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @Y_2_2(%tile_2_2, {%tile_2_0}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    aie.objectfifo @Y_3_2(%tile_3_2, {%tile_3_0}, 2 : i32) : !aie.objectfifo<memref<1x1024xf32>>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c4 step %c1 {
          %0 = aie.objectfifo.acquire @X_0_2(Consume, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %2 = aie.objectfifo.acquire @Y_0_2(Produce, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %4 = arith.constant 3.000000e+00 : f32
          func.call @vscale(%1, %3, %4) : (memref<1x1024xf32>, memref<1x1024xf32>, f32) -> ()
          aie.objectfifo.release @X_0_2(Consume, 1)
          aie.objectfifo.release @Y_0_2(Produce, 1)
        }
      }
      aie.end
    } {link_with = "vector_scalar.kernels.o"}
    %core_1_2 = aie.core(%tile_1_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c4 step %c1 {
          %0 = aie.objectfifo.acquire @X_1_2(Consume, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %2 = aie.objectfifo.acquire @Y_1_2(Produce, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %4 = arith.constant 3.000000e+00 : f32
          func.call @vscale(%1, %3, %4) : (memref<1x1024xf32>, memref<1x1024xf32>, f32) -> ()
          aie.objectfifo.release @X_1_2(Consume, 1)
          aie.objectfifo.release @Y_1_2(Produce, 1)
        }
      }
      aie.end
    } {link_with = "vector_scalar.kernels.o"}
    %core_2_2 = aie.core(%tile_2_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c4 step %c1 {
          %0 = aie.objectfifo.acquire @X_2_2(Consume, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %2 = aie.objectfifo.acquire @Y_2_2(Produce, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %4 = arith.constant 3.000000e+00 : f32
          func.call @vscale(%1, %3, %4) : (memref<1x1024xf32>, memref<1x1024xf32>, f32) -> ()
          aie.objectfifo.release @X_2_2(Consume, 1)
          aie.objectfifo.release @Y_2_2(Produce, 1)
        }
      }
      aie.end
    } {link_with = "vector_scalar.kernels.o"}
    %core_3_2 = aie.core(%tile_3_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c4 = arith.constant 4 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c4 step %c1 {
          %0 = aie.objectfifo.acquire @X_3_2(Consume, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %2 = aie.objectfifo.acquire @Y_3_2(Produce, 1) : !aie.objectfifosubview<memref<1x1024xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<1x1024xf32>> -> memref<1x1024xf32>
          %4 = arith.constant 3.000000e+00 : f32
          func.call @vscale(%1, %3, %4) : (memref<1x1024xf32>, memref<1x1024xf32>, f32) -> ()
          aie.objectfifo.release @X_3_2(Consume, 1)
          aie.objectfifo.release @Y_3_2(Produce, 1)
        }
      }
      aie.end
    } {link_with = "vector_scalar.kernels.o"}
    aiex.runtime_sequence(%arg0: memref<16384xf32>, %arg1: memref<16384xf32>) {
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 0][1, 1, 1, 4096][0, 0, 0, 1]) {id = 0 : i64, metadata = @X_0_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 4096][1, 1, 1, 4096][0, 0, 0, 1]) {id = 1 : i64, metadata = @X_1_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 8192][1, 1, 1, 4096][0, 0, 0, 1]) {id = 2 : i64, metadata = @X_2_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 12288][1, 1, 1, 4096][0, 0, 0, 1]) {id = 3 : i64, metadata = @X_3_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 0][1, 1, 1, 4096][0, 0, 0, 1]) {id = 4 : i64, issue_token = true, metadata = @Y_0_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 4096][1, 1, 1, 4096][0, 0, 0, 1]) {id = 5 : i64, issue_token = true, metadata = @Y_1_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 8192][1, 1, 1, 4096][0, 0, 0, 1]) {id = 6 : i64, issue_token = true, metadata = @Y_2_2} : memref<16384xf32>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 12288][1, 1, 1, 4096][0, 0, 0, 1]) {id = 7 : i64, issue_token = true, metadata = @Y_3_2} : memref<16384xf32>
      aiex.npu.dma_wait {symbol = @Y_0_2}
      aiex.npu.dma_wait {symbol = @Y_1_2}
      aiex.npu.dma_wait {symbol = @Y_2_2}
      aiex.npu.dma_wait {symbol = @Y_3_2}
    }
  }
}
