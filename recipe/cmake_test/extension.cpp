// A Python extension module built against libtorch_python, the way torch C++ extensions are.
#include <torch/extension.h>

torch::Tensor scaled_sum(const torch::Tensor& tensor, double factor) { return (tensor * factor).sum(); }

PYBIND11_MODULE(torch_consumer_ext, module) {
  module.def("scaled_sum", &scaled_sum, "sum of the tensor's elements times factor");
}
