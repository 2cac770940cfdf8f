#include <torch/csrc/python_bindings.h>

#include <ATen/Context.h>

PyObject* THCPModule_hasMagma(PyObject*, PyObject*) { return PyBool_FromLong(at::hasMAGMA()); }
PyObject* THCPModule_hasCuda(PyObject*, PyObject*) { return PyBool_FromLong(at::hasCUDA()); }
