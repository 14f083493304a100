// jit.cuh - the CUDA backend's run-time compiler (internal; jit.cu): CUDA
// C++ source to a launchable kernel through NVRTC, for kernels that are
// generated while a program runs (pointwise.cu's fused elementwise
// programs). The source may include nb_scalar_math.h and nb_kernel_ops.h,
// which NVRTC gets from memory (their text is compiled into the library),
// so generated kernels evaluate the formulas the compiled kernels do.
//
// Caches: in memory per device for the process, and on disk as cubins in
// NB_KERNEL_CACHE (default $XDG_CACHE_HOME/nabla/kernels, else
// ~/.cache/nabla/kernels; "off" or "0" turns the disk cache off). A cache
// file is named by a 128-bit hash of the source, the kernel's name, the
// headers' text, the options, the GPU's architecture and NVRTC's version,
// and holds that hash to check against; files are written to a temporary
// name and renamed (core/file.c), so processes sharing the directory never
// read a partial file. NB_COMPILE_DUMP=dir writes each source as
// dir/<hash>.cu the first time a process asks for it.
#pragma once

#include "cuda_common.cuh"

namespace nbc {

// The kernel `name` (declared extern "C" __global__ in src) compiled for
// be's device, from the caches when it was compiled before. Errors:
// NB_ERR_UNSUPPORTED naming slot, with NVRTC's log for a source that does
// not compile (or an architecture NVRTC does not know); the CUDA error of a
// module that does not load. Safe from any thread, and while a stream is captured.
nb_status jit_kernel(nb_backend *be, const char *slot, const char *src, const char *name, cudaKernel_t *out);

// Launches k on the current stream with its one parameter, the struct at
// param (the kernel's signature gives its size), counting the launch.
nb_status jit_launch(nb_backend *be, const char *slot, cudaKernel_t k, unsigned grid, unsigned block,
                     void *param);

// Kernels compiled by NVRTC and kernels loaded from the disk cache on
// device d since the process started (nb_device_counters).
void jit_counters(int d, uint64_t *compiled, uint64_t *disk_loads);

} // namespace nbc
