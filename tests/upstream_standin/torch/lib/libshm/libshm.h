#pragma once
#include <c10/macros/Export.h>

TORCH_API int libshm_init(const char* manager_path);
