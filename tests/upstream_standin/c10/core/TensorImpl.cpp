#include <c10/core/Device.h>

namespace c10 {
long long tensor_numel(const long long* sizes, int ndim) {
  long long n = 1;
  for (int i = 0; i < ndim; ++i) n *= sizes[i];
  return n;
}
}  // namespace c10
