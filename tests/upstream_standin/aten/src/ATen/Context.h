#pragma once
#include <c10/macros/Export.h>

namespace at {
// Hooks a CUDA library installs when it is loaded; the CPU defaults answer "no CUDA".
struct CUDAHooksInterface {
  bool (*has_cuda)();
  bool (*has_magma)();
};
TORCH_API void set_cuda_hooks(const CUDAHooksInterface& hooks);
TORCH_API bool hasCUDA();
TORCH_API bool hasMAGMA();
TORCH_API const char* version();
TORCH_API double add(double a, double b, double alpha);
TORCH_API double sum(const double* values, int n);
TORCH_API int num_registered_ops();
TORCH_API const char* registered_op(int index);
TORCH_API bool hasMKL();  // the BLAS libtorch_cpu was built with (Context.cpp)
TORCH_API int blas_threads();

// dlopen wrapper; lives in torch_cpu, so its RUNPATH decides where lazily loaded libraries are found.
struct TORCH_API DynamicLibrary {
  explicit DynamicLibrary(const char* name);
  ~DynamicLibrary();
  void* sym(const char* name) const;
  void* handle;
};
}  // namespace at
