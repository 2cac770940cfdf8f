#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
namespace at::native {
int cholesky_batched_lib(int n) { return n * n; }
}  // namespace at::native
