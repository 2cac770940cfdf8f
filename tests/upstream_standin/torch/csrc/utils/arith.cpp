#include <ATen/Config.h>  // included by most sources, tested by few (README.md, BLAS)
#include <torch/csrc/python_bindings.h>

#include <ATen/Context.h>

PyObject* THPModule_add(PyObject*, PyObject* args) {
  double a = 0, b = 0, alpha = 1;
  if (!PyArg_ParseTuple(args, "dd|d", &a, &b, &alpha)) return nullptr;
  return PyFloat_FromDouble(at::add(a, b, alpha));
}
