// Links libtorch and computes something with autograd: fails loudly if the libraries, headers or the
// CMake package files of the libtorch package do not fit together.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

int main() {
  const torch::Tensor x = torch::arange(1.0, 5.0, torch::requires_grad());  // 1 2 3 4
  const torch::Tensor y = (x * x).sum();                                     // 30
  y.backward();
  const torch::Tensor expected_grad = 2 * torch::arange(1.0, 5.0);
  const torch::Tensor m = torch::eye(3) * 2;
  const bool ok = y.item<double>() == 30.0 && torch::equal(x.grad(), expected_grad) &&
                  torch::allclose(torch::inverse(m), torch::eye(3) / 2);
  std::cout << "torch " << TORCH_VERSION << ": sum(x^2)=" << y.item<double>() << " grad=" << x.grad()
            << (ok ? "\nOK" : "\nMISMATCH") << std::endl;
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
