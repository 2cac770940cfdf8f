// Functions of torch_python that Module.cpp gathers into the torch._C module table.
#pragma once

// The CPython functions the stand-in's torch_python sources call, declared here rather than by <Python.h>
// (which only Module.cpp, stub.c and the numpy check need): g++ 12 spends 0.34 s of CPU parsing <Python.h>
// in a C++ file, 0.01 s without it (measured here), and every rehearsal compiles these objects once per
// Python. Their command lines still carry the Python include directories (Python::Module), so what the
// megabuild's per-Python passes recompile is unchanged. Py_PYTHON_H is <Python.h>'s include guard.
#ifndef Py_PYTHON_H
extern "C" {
struct _object;
typedef struct _object PyObject;
PyObject* PyUnicode_FromString(const char* text);
PyObject* PyBool_FromLong(long value);
PyObject* PyLong_FromLong(long value);
PyObject* PyFloat_FromDouble(double value);
PyObject* PyList_New(long size);  // Py_ssize_t: long on the LP64 ELF targets the stand-in is compiled for
int PyList_Append(PyObject* list, PyObject* item);
void Py_DecRef(PyObject* object);
int PyArg_ParseTuple(PyObject* args, const char* format, ...);
}
#endif

PyObject* THPModule_version(PyObject* self, PyObject* args);
PyObject* THPModule_add(PyObject* self, PyObject* args);
PyObject* THPModule_registeredOps(PyObject* self, PyObject* args);
PyObject* THPModule_numpyInclude(PyObject* self, PyObject* args);
PyObject* THCPModule_hasMagma(PyObject* self, PyObject* args);
PyObject* THCPModule_hasCuda(PyObject* self, PyObject* args);
