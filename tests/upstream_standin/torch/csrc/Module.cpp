#include <Python.h>
#include <torch/csrc/python_bindings.h>

#include <ATen/Config.h>
#include <ATen/Context.h>
#include <c10/macros/Export.h>

namespace {
// torch._C.has_mkl asks libtorch_cpu (2.6.0's torch/csrc/Module.cpp: at::hasMKL()); its one BLAS test,
// "AT_MKL_ENABLED() || AT_POCKETFFT_ENABLED()" for has_spectral, holds under every BLAS, so no
// Python-linked source's preprocessed input depends on the BLAS (measured on 2.6.0: none of its 154
// Python-linked objects missed the compiler cache under the other BLAS)
PyObject* THPModule_hasMkl(PyObject*, PyObject*) { return PyBool_FromLong(at::hasMKL()); }
#if AT_MKL_ENABLED() || AT_POCKETFFT_ENABLED()
PyObject* THPModule_hasSpectral(PyObject*, PyObject*) { Py_RETURN_TRUE; }
#else
PyObject* THPModule_hasSpectral(PyObject*, PyObject*) { Py_RETURN_FALSE; }
#endif

PyMethodDef methods[] = {
    {"_version", THPModule_version, METH_NOARGS, "version string from libtorch_cpu"},
    {"_add", THPModule_add, METH_VARARGS, "a + alpha * b, computed in C++ by libtorch_cpu"},
    {"_registered_ops", THPModule_registeredOps, METH_NOARGS, "operators from the generated registry"},
    {"_numpy_abi", THPModule_numpyInclude, METH_NOARGS, "NumPy C-API version torch_python was built with"},
    {"_has_magma", THCPModule_hasMagma, METH_NOARGS, "asks the lazily loaded linalg library"},
    {"_cuda_compiled", THCPModule_hasCuda, METH_NOARGS, "whether libtorch_cuda is loaded"},
    {"_has_mkl", THPModule_hasMkl, METH_NOARGS, "whether the build's BLAS is MKL"},
    {"_has_spectral", THPModule_hasSpectral, METH_NOARGS, "whether FFTs are built (MKL or pocketfft)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "torch._C", "stand-in of torch._C", -1, methods};
}  // namespace

// Called from the setuptools-built stub (torch/csrc/stub.c), as upstream's PyInit__C does.
extern "C" TORCH_API PyObject* initModule() { return PyModule_Create(&module_def); }
