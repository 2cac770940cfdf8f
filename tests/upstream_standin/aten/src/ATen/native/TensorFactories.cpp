#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <ATen/Context.h>
#include <c10/core/Device.h>

namespace at {
// Referenced so that torch_cpu really depends on c10.
long long empty_numel(const long long* sizes, int ndim) { return c10::tensor_numel(sizes, ndim); }
}  // namespace at
