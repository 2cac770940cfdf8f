#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <ATen/cuda/CUDAConfig.h>
#include <c10/cuda/CUDAFunctions.h>

namespace at::cuda {
int device_count_from_context() { return c10::cuda::device_count(); }
const char* nvcc_flags() { return NVCC_FLAGS_EXTRA; }
}  // namespace at::cuda
