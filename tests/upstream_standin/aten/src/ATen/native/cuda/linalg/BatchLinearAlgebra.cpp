#include <ATen/Context.h>

// USE_MAGMA is a compile definition of the linalg sources only (see CMakeLists.txt).
#ifdef USE_MAGMA
#include <magma_v2.h>

namespace {
// Upstream's lazy linalg library initialises MAGMA from a static constructor when it is dlopened.
struct MagmaInitializer {
  MagmaInitializer() { magma_init(); }
} magma_initializer;
}  // namespace

extern "C" TORCH_API bool torch_cuda_linalg_has_magma() { return magma_version_major() > 0; }
#else
extern "C" TORCH_API bool torch_cuda_linalg_has_magma() { return false; }
#endif
