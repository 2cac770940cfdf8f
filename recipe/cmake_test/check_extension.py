"""Imports the extension module built by CMakeLists.txt (WITH_TORCH_PYTHON) and calls it with a tensor."""

import torch
import torch_consumer_ext

result = torch_consumer_ext.scaled_sum(torch.ones(4), 2.5)
assert isinstance(result, torch.Tensor) and result.item() == 10.0, result
print("torch_python extension OK:", result.item())
