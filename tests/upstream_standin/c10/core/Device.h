#pragma once
#include <c10/macros/Export.h>

namespace c10 {
// A device kind and index, as small as the stand-in needs.
struct C10_API Device {
  int kind;
  int index;
};
C10_API const char* device_name(int kind);
C10_API int allocate_bytes(int n);
C10_API double scalar_to_double(long long value);
C10_API long long tensor_numel(const long long* sizes, int ndim);
}  // namespace c10
