// Links libtorch and computes something with autograd: fails loudly if the libraries, headers or the
// CMake package files of the libtorch package do not fit together. With a CUDA build on a machine with a
// GPU it also computes on the GPU (libtorch_cuda through the same CMake targets); elsewhere it says so.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>

int main() {
  const torch::Tensor x = torch::arange(1.0, 5.0, torch::requires_grad());  // 1 2 3 4
  const torch::Tensor y = (x * x).sum();                                     // 30
  y.backward();
  const torch::Tensor expected_grad = 2 * torch::arange(1.0, 5.0);
  const torch::Tensor m = torch::eye(3) * 2;
  bool ok = y.item<double>() == 30.0 && torch::equal(x.grad(), expected_grad) &&
            torch::allclose(torch::inverse(m), torch::eye(3) / 2);
  std::string cuda = "no CUDA device";
  if (torch::cuda::is_available()) {
    const torch::Tensor on_gpu = torch::arange(1.0, 5.0, torch::TensorOptions().device(torch::kCUDA));
    const bool gpu_ok = (on_gpu * on_gpu).sum().item<double>() == 30.0;
    cuda = std::string("CUDA sum(x^2) on ") + std::to_string(torch::cuda::device_count()) + " device(s) " +
           (gpu_ok ? "ok" : "WRONG");
    ok = ok && gpu_ok;
  }
  std::cout << "torch " << TORCH_VERSION << ": sum(x^2)=" << y.item<double>() << " grad=" << x.grad() << "\n"
            << cuda << (ok ? "\nOK" : "\nMISMATCH") << std::endl;
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
