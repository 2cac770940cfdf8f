#include <torch/csrc/python_bindings.h>

#ifdef USE_NUMPY
#include <numpy/numpyconfig.h>
#define TORCH_NUMPY_ABI NPY_ABI_VERSION
#else
#define TORCH_NUMPY_ABI 0
#endif

PyObject* THPModule_numpyInclude(PyObject*, PyObject*) { return PyLong_FromLong(TORCH_NUMPY_ABI); }
