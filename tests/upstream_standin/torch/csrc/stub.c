/* The torch._C extension module: setuptools builds it; it only forwards to libtorch_python. */
#include <Python.h>

extern PyObject* initModule(void);

PyMODINIT_FUNC PyInit__C(void) { return initModule(); }
