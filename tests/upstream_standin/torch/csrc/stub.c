/* The torch._C extension module: a CMake MODULE target in 2.13 (Python_add_library(_C MODULE WITH_SOABI));
   it only forwards to libtorch_python. */
#include <Python.h>

extern PyObject* initModule(void);

PyMODINIT_FUNC PyInit__C(void) { return initModule(); }
