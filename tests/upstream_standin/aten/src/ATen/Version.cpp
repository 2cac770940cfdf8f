#include <ATen/Context.h>
#include <ATen/Functions.h>

namespace at {
const char* version() { return TORCH_STANDIN_VERSION; }
}  // namespace at
