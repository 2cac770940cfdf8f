#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <ATen/Context.h>

namespace at {
double sum(const double* values, int n) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += values[i];
  return total;
}
}  // namespace at
