# Test double of PyTorch 2.13's cmake/EnvVarForwarding.cmake semantics (not its code):
# environment variables named BUILD_*, USE_*, CMAKE_* (plus a fixed list) become STRING cache
# entries, but only when the variable is not already defined: a -D on the command line or a value
# already in CMakeCache.txt wins over the environment. This runs on every (re)configure.

set(_torch_forwarded_names
    BLAS WITH_BLAS TORCH_CUDA_ARCH_LIST INSTALL_TEST CUDNN_LIBRARY CUDNN_INCLUDE_DIR CUDNN_ROOT
    CUDA_HOST_COMPILER CUDA_NVCC_EXECUTABLE ATEN_THREADING MKL_THREADING ONNX_ML ONNX_NAMESPACE
    WERROR PYTHON_LIB_REL_PATH)

execute_process(COMMAND "${CMAKE_COMMAND}" -E environment OUTPUT_VARIABLE _torch_env_text)
# Protect list separators inside values (TORCH_CUDA_ARCH_LIST="8.0;9.0") before splitting lines.
string(REPLACE ";" "<semicolon>" _torch_env_text "${_torch_env_text}")
string(REGEX MATCHALL "[^\n]+" _torch_env_lines "${_torch_env_text}")
foreach(_line IN LISTS _torch_env_lines)
  if(NOT _line MATCHES "^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
    continue()
  endif()
  set(_name "${CMAKE_MATCH_1}")
  string(REPLACE "<semicolon>" ";" _value "${CMAKE_MATCH_2}")
  set(_forward OFF)
  if(_name MATCHES "^(BUILD|USE|CMAKE)_" OR _name MATCHES "EXITCODE(__TRYRUN_OUTPUT)?$")
    set(_forward ON)
  elseif(_name IN_LIST _torch_forwarded_names)
    set(_forward ON)
  endif()
  if(_forward AND NOT DEFINED ${_name})
    set(${_name} "${_value}" CACHE STRING "Forwarded from the environment by EnvVarForwarding.cmake")
  endif()
endforeach()
