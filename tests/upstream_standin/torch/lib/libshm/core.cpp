#include "libshm.h"

#include <cstring>

int libshm_init(const char* manager_path) { return manager_path == nullptr ? -1 : static_cast<int>(std::strlen(manager_path)); }
