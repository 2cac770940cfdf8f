#pragma once
#include <c10/macros/Export.h>

namespace c10::cuda {
C10_API int device_count();
C10_API int current_stream_id();
C10_API int caching_allocator_blocks();
}  // namespace c10::cuda
