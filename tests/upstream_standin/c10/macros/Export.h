// Test double of PyTorch's c10/macros/Export.h: symbol visibility for the stand-in's libraries.
#pragma once
#define C10_API __attribute__((visibility("default")))
#define TORCH_API __attribute__((visibility("default")))
