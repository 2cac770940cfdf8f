#include <ATen/Context.h>
#include <ATen/cuda/CUDAConfig.h>

#ifdef BUILD_LAZY_CUDA_LINALG
namespace at::cuda::detail {
// Asks the lazily loaded linalg library (dlopened by bare soname through torch_cpu's
// DynamicLibrary) whether it was built with MAGMA: the run-time answer the recipe's patch gives.
bool lazy_linalg_has_magma() {
  static DynamicLibrary lib("libtorch_cuda_linalg.so");
  auto* fn = reinterpret_cast<bool (*)()>(lib.sym("torch_cuda_linalg_has_magma"));
  return fn != nullptr && fn();
}
}  // namespace at::cuda::detail
#else
// Without the lazy library (Windows: BUILD_LAZY_CUDA_LINALG needs LINUX) the linalg sources are part
// of torch_cuda, this file too: the answer is linked in.
extern "C" bool torch_cuda_linalg_has_magma();
namespace at::cuda::detail {
bool lazy_linalg_has_magma() { return torch_cuda_linalg_has_magma(); }
}  // namespace at::cuda::detail
#endif
