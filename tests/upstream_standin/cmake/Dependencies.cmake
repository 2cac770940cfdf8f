# Python detection with PyTorch 2.13's find_package call and its fall-back behaviour.

# caffe2_update_option: FORCE-writes an option into the cache, as upstream's macro does.
macro(caffe2_update_option variable value)
  get_property(_help CACHE "${variable}" PROPERTY HELPSTRING)
  set(${variable} ${value} CACHE BOOL "${_help}" FORCE)
endmacro()

if(BUILD_PYTHON)
  set(_python_optional Development.Module)
  if(USE_NUMPY)
    list(APPEND _python_optional NumPy)
  endif()
  find_package(Python COMPONENTS Interpreter OPTIONAL_COMPONENTS ${_python_optional})
else()
  find_package(Python COMPONENTS Interpreter)
endif()

if(NOT Python_Interpreter_FOUND)
  message(FATAL_ERROR "Python interpreter not found; pass -DPython_EXECUTABLE=<python>")
endif()

# The trap the megabuild must avoid: a stale FindPython cache makes Development.Module "missing",
# and the build then silently drops torch_python (and, on the next configure, the lazy linalg library).
if(BUILD_PYTHON AND NOT Python_Development.Module_FOUND)
  message(WARNING "Python development files not found for ${Python_EXECUTABLE}: setting BUILD_PYTHON OFF")
  caffe2_update_option(BUILD_PYTHON OFF)
endif()
if(USE_NUMPY AND NOT Python_NumPy_FOUND)
  message(WARNING "NumPy not found for ${Python_EXECUTABLE}: setting USE_NUMPY OFF")
  caffe2_update_option(USE_NUMPY OFF)
endif()

# TORCH_CUDA_ARCH_LIST from the environment shadows the cache on every configure, as upstream.
if(DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "$ENV{TORCH_CUDA_ARCH_LIST}")
endif()
