// Functions of torch_python that Module.cpp gathers into the torch._C module table.
#pragma once
#include <Python.h>

PyObject* THPModule_version(PyObject* self, PyObject* args);
PyObject* THPModule_add(PyObject* self, PyObject* args);
PyObject* THPModule_registeredOps(PyObject* self, PyObject* args);
PyObject* THPModule_numpyInclude(PyObject* self, PyObject* args);
PyObject* THCPModule_hasMagma(PyObject* self, PyObject* args);
PyObject* THCPModule_hasCuda(PyObject* self, PyObject* args);
