module {
  aie.device(npu1_4col) {
    func.func private @load_tile(memref<32x64xf32>, memref<32x64xf32>)
    func.func private @silu_tile(memref<32x64xf32>, memref<32x64xf32>)
    func.func private @store_tile(memref<32x64xf32>, memref<32x64xf32>)
    %tile_0_0 = aie.tile(0, 0)
    %tile_0_2 = aie.tile(0, 2)
    %tile_0_3 = aie.tile(0, 3)
    %tile_0_4 = aie.tile(0, 4)
    aie.objectfifo @Src(%tile_0_0, {%tile_0_2}, 2 : i32) : !aie.objectfifo<memref<32x64xf32>>
    aie.objectfifo @loaded(%tile_0_2, {%tile_0_3}, 2 : i32) : !aie.objectfifo<memref<32x64xf32>>
    aie.objectfifo @computed(%tile_0_3, {%tile_0_4}, 2 : i32) : !aie.objectfifo<memref<32x64xf32>>
    aie.objectfifo @Dst(%tile_0_4, {%tile_0_0}, 2 : i32) : !aie.objectfifo<memref<32x64xf32>>
    %core_0_2 = aie.core(%tile_0_2) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c16 = arith.constant 16 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c16 step %c1 {
          %0 = aie.objectfifo.acquire @Src(Consume, 1) : !aie.objectfifosubview<memref<32x64xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x64xf32>> -> memref<32x64xf32>
          %2 = aie.objectfifo.acquire @loaded(Produce, 1) : !aie.objectfifosubview<memref<32x64xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x64xf32>> -> memref<32x64xf32>
          func.call @load_tile(%1, %3) : (memref<32x64xf32>, memref<32x64xf32>) -> ()
          aie.objectfifo.release @Src(Consume, 1)
          aie.objectfifo.release @loaded(Produce, 1)
        }
      }
      aie.end
    } {link_with = "pipeline3.kernels.o"}
    %core_0_3 = aie.core(%tile_0_3) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c16 = arith.constant 16 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c16 step %c1 {
          %0 = aie.objectfifo.acquire @loaded(Consume, 1) : !aie.objectfifosubview<memref<32x64xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x64xf32>> -> memref<32x64xf32>
          %2 = aie.objectfifo.acquire @computed(Produce, 1) : !aie.objectfifosubview<memref<32x64xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x64xf32>> -> memref<32x64xf32>
          func.call @silu_tile(%1, %3) : (memref<32x64xf32>, memref<32x64xf32>) -> ()
          aie.objectfifo.release @loaded(Consume, 1)
          aie.objectfifo.release @computed(Produce, 1)
        }
      }
      aie.end
    } {link_with = "pipeline3.kernels.o"}
    %core_0_4 = aie.core(%tile_0_4) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c9223372036854775807 = arith.constant 9223372036854775807 : index
      %c16 = arith.constant 16 : index
      scf.for %iv0 = %c0 to %c9223372036854775807 step %c1 {
        scf.for %iv1 = %c0 to %c16 step %c1 {
          %0 = aie.objectfifo.acquire @computed(Consume, 1) : !aie.objectfifosubview<memref<32x64xf32>>
          %1 = aie.objectfifo.subview.access %0[0] : !aie.objectfifosubview<memref<32x64xf32>> -> memref<32x64xf32>
          %2 = aie.objectfifo.acquire @Dst(Produce, 1) : !aie.objectfifosubview<memref<32x64xf32>>
          %3 = aie.objectfifo.subview.access %2[0] : !aie.objectfifosubview<memref<32x64xf32>> -> memref<32x64xf32>
          func.call @store_tile(%1, %3) : (memref<32x64xf32>, memref<32x64xf32>) -> ()
          aie.objectfifo.release @computed(Consume, 1)
          aie.objectfifo.release @Dst(Produce, 1)
        }
      }
      aie.end
    } {link_with = "pipeline3.kernels.o"}
    aiex.runtime_sequence(%arg0: memref<32768xf32>, %arg1: memref<32768xf32>) {
      aiex.npu.dma_memcpy_nd(%arg0[0, 0, 0, 0][1, 1, 1, 32768][0, 0, 0, 1]) {id = 0 : i64, metadata = @Src} : memref<32768xf32>
      aiex.npu.dma_memcpy_nd(%arg1[0, 0, 0, 0][1, 1, 1, 32768][0, 0, 0, 1]) {id = 1 : i64, issue_token = true, metadata = @Dst} : memref<32768xf32>
      aiex.npu.dma_wait {symbol = @Dst}
    }
  }
}
