#include "libshm.h"

#include <cstdio>

int main() {
  std::puts("torch_shm_manager (upstream stand-in)");
  return libshm_init("torch_shm_manager") > 0 ? 0 : 1;
}
