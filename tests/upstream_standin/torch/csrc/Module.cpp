#include <Python.h>
#include <torch/csrc/python_bindings.h>

#include <c10/macros/Export.h>

namespace {
PyMethodDef methods[] = {
    {"_version", THPModule_version, METH_NOARGS, "version string from libtorch_cpu"},
    {"_add", THPModule_add, METH_VARARGS, "a + alpha * b, computed in C++ by libtorch_cpu"},
    {"_registered_ops", THPModule_registeredOps, METH_NOARGS, "operators from the generated registry"},
    {"_numpy_abi", THPModule_numpyInclude, METH_NOARGS, "NumPy C-API version torch_python was built with"},
    {"_has_magma", THCPModule_hasMagma, METH_NOARGS, "asks the lazily loaded linalg library"},
    {"_cuda_compiled", THCPModule_hasCuda, METH_NOARGS, "whether libtorch_cuda is loaded"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "torch._C", "stand-in of torch._C", -1, methods};
}  // namespace

// Called from the setuptools-built stub (torch/csrc/stub.c), as upstream's PyInit__C does.
extern "C" TORCH_API PyObject* initModule() { return PyModule_Create(&module_def); }
