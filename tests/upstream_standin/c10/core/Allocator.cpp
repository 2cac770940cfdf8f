#include <c10/core/Device.h>

namespace c10 {
int allocate_bytes(int n) { return n <= 0 ? 0 : (n + 63) / 64 * 64; }
}  // namespace c10
