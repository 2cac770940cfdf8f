#include <ATen/Context.h>

namespace at {
double add(double a, double b, double alpha) { return a + alpha * b; }
}  // namespace at
