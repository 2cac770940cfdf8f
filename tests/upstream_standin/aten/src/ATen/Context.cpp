#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <ATen/Context.h>

namespace at {
namespace {
bool no() { return false; }
CUDAHooksInterface g_hooks{&no, &no};
}  // namespace

void set_cuda_hooks(const CUDAHooksInterface& hooks) { g_hooks = hooks; }
bool hasCUDA() { return g_hooks.has_cuda(); }
bool hasMAGMA() { return g_hooks.has_magma(); }
// the BLAS libtorch_cpu was built with (2.6.0's Context::hasMKL tests AT_MKL_ENABLED() here, in torch_cpu)
bool hasMKL() { return AT_MKL_ENABLED(); }
}  // namespace at
