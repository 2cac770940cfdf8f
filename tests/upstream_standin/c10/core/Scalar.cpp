#include <c10/core/Device.h>

namespace c10 {
double scalar_to_double(long long value) { return static_cast<double>(value); }
}  // namespace c10
