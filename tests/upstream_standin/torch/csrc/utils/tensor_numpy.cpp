#include <torch/csrc/python_bindings.h>
// upstream's <Python.h> makes this file's preprocessed input differ per Python; the version header does
// here (python_bindings.h leaves <Python.h> out for speed)
#include <patchlevel.h>

#ifdef USE_NUMPY
#include <numpy/numpyconfig.h>
#define TORCH_NUMPY_ABI NPY_ABI_VERSION
#else
#define TORCH_NUMPY_ABI 0
#endif

PyObject* THPModule_numpyInclude(PyObject*, PyObject*) {
  return PyLong_FromLong(PY_VERSION_HEX > 0 ? TORCH_NUMPY_ABI : 0);
}
