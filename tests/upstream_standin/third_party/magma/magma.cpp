#include "magma_v2.h"

extern "C" {
int magma_init() { return 0; }
int magma_version_major() { return 2; }
}
