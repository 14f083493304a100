// block_reduce.cuh - fixed-tree sums across a warp and a block (internal;
// conv.cu, batch_norm.cu, layer_norm.cu). The tree depends only on the
// block size, so a launch configuration gives the same bits on every run:
// no atomics. XOR butterflies leave the same value in every lane (each
// step adds the same two operands in either order, and IEEE addition is
// commutative).
#pragma once

#include "cuda_common.cuh"

namespace nbc {

template <typename A> __device__ inline A warp_sum(A v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The sum of v over the block, returned to every thread. blockDim.x must be
// a multiple of 32 (<= 1024) and every thread must call it (it holds
// __syncthreads); red is __shared__ scratch of >= 32 elements, reusable by
// the next call (the leading barrier protects it).
template <typename A> __device__ inline A block_sum(A v, A *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // red may still be read by a previous call
    if (lane == 0) red[w] = v;
    __syncthreads();
    A r = lane < nw ? red[lane] : (A)0;
    return warp_sum(r); // every warp reduces the same partials the same way
}

} // namespace nbc
