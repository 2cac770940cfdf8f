#include <c10/cuda/CUDAFunctions.h>

// Plain C++ in the stand-in: there is no GPU, so no device is ever visible.
namespace c10::cuda {
int device_count() { return 0; }
}  // namespace c10::cuda
