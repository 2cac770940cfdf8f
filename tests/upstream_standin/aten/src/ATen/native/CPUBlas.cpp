// The CPU BLAS entry (2.6.0's aten/src/ATen/native/CPUBlas.cpp tests AT_MKL_ENABLED()): one of the few
// sources whose preprocessed input the BLAS changes; with MKL, libtorch_cpu calls into MKL.
#include <ATen/Config.h>
#include <ATen/Context.h>

#if AT_MKL_ENABLED()
#include <mkl.h>
#endif

namespace at {
int blas_threads() {
#if AT_MKL_ENABLED()
  return mkl_get_max_threads();
#else
  return 1;
#endif
}
}  // namespace at
