#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <torch/csrc/python_bindings.h>

#include <ATen/Context.h>

PyObject* THPModule_version(PyObject*, PyObject*) { return PyUnicode_FromString(at::version()); }
