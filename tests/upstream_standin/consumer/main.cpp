// Prints the stand-in's version and 1 + 2 * 3 computed by libtorch_cpu (at::add with alpha).
#include <torch/torch.h>
#include <cstdio>
int main() { std::printf("%s %g\n", at::version(), at::add(1.0, 2.0, 3.0)); }
