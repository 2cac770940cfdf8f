#include <ATen/Context.h>
#include <ATen/cuda/CUDAConfig.h>

namespace at::cuda::detail {
bool lazy_linalg_has_magma();  // LinearAlgebraStubs.cpp

namespace {
bool has_cuda() { return true; }
// Registered when libtorch_cuda is loaded, like upstream's REGISTER_CUDA_HOOKS.
struct RegisterHooks {
  RegisterHooks() { set_cuda_hooks(CUDAHooksInterface{&has_cuda, &lazy_linalg_has_magma}); }
} register_hooks;
}  // namespace
}  // namespace at::cuda::detail
