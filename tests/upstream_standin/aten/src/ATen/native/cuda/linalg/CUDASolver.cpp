#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>

namespace at::cuda::solver {
// Uses libtorch_cpu and libc10_cuda, as upstream's solver wrappers do, so both are NEEDED.
int getrf_workspace(int n) { return hasCUDA() ? 4 * n * (c10::cuda::device_count() + 1) : 0; }
}  // namespace at::cuda::solver
