#include <c10/core/Device.h>

namespace c10 {
const char* device_name(int kind) { return kind == 1 ? "cuda" : "cpu"; }
}  // namespace c10
