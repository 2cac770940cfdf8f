#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <ATen/Context.h>

namespace at {
double add(double a, double b, double alpha) { return a + alpha * b; }
}  // namespace at
