// nnapi_backend of the upstream stand-in (a TEST DOUBLE): in PyTorch 2.13.0 a shared library built on
// non-Darwin platforms when BUILD_PYTHON is on, linking torch_python; it is not installed.
#include <patchlevel.h>  // PY_MINOR_VERSION; not <Python.h> (see torch/csrc/python_bindings.h)

struct _object;
typedef struct _object PyObject;

extern "C" PyObject* initModule();

extern "C" __attribute__((visibility("default"))) int nnapi_backend_registered() {
  return PY_MINOR_VERSION > 0 && &initModule != nullptr;
}
