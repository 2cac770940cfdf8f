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

# Cross-compiling: CMake >= 4.1 (policy CMP0190) does not run the interpreter for Python_SOABI unless
# CMAKE_CROSSCOMPILING_EMULATOR is set, so it stays empty and Python_add_library(... WITH_SOABI) names the
# module "_C.so" (pytorch-cpu-feedstock 74dd3d46, patch 0022's header; conda-forge builds with CMake 4).
# This machine's CMake may be older and would run it: model the newer behaviour.
if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  set(Python_SOABI "")
endif()
# The recipe's patch 0012 (cmake/Dependencies.cmake, after the Python checks): an empty Python_SOABI is
# asked from the interpreter, which cross-python makes report the target's. STANDIN_WITHOUT_PATCH_0012=ON
# shows the build without it (tests/proofs/rehearsal/test_rehearsal_platforms.py).
option(STANDIN_WITHOUT_PATCH_0012 "test switch: behave like 2.13.0 without the recipe's patch 0012" OFF)
if(CMAKE_CROSSCOMPILING AND NOT Python_SOABI AND NOT STANDIN_WITHOUT_PATCH_0012)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import sysconfig; print(sysconfig.get_config_var('SOABI') or '')"
    OUTPUT_VARIABLE _target_python_soabi OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _target_python_status)
  if(NOT _target_python_status EQUAL 0 OR NOT _target_python_soabi)
    message(FATAL_ERROR "Python_SOABI is empty while cross-compiling and ${Python_EXECUTABLE} did not "
                        "report the target's SOABI: build with cross-python")
  endif()
  set(Python_SOABI "${_target_python_soabi}")
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

# ---[ BLAS, as 2.6.0 chooses it (cmake/Dependencies.cmake: the BLAS cache entry, which EnvVarForwarding.cmake
# fills from the environment's BLAS; cmake/Modules/FindMKL.cmake for MKL). MKL's compile options reach EVERY
# command of the build: FindMKL.cmake's add_compile_options(-DMKL_HAS_SBGEMM -DMKL_HAS_SHGEMM) and
# Dependencies.cmake's include_directories(AFTER SYSTEM ${MKL_INCLUDE_DIR}) (measured on the 2.6.0 source:
# every one of its 1,349 command lines changes with the BLAS, ../shared/docs/blas-share-2.6.0.md). Generic
# links no library here (the reference BLAS is not modelled).
set(BLAS "Generic" CACHE STRING "Selected BLAS library")
set_property(CACHE BLAS PROPERTY STRINGS "Generic;MKL")
if(BLAS STREQUAL "MKL")
  find_path(MKL_INCLUDE_DIR mkl.h HINTS "$ENV{INTEL_MKL_DIR}/include")
  find_library(MKL_LIBRARIES mkl_rt HINTS "$ENV{INTEL_MKL_DIR}/lib")
  if(NOT MKL_INCLUDE_DIR OR NOT MKL_LIBRARIES)
    message(FATAL_ERROR "BLAS=MKL but MKL was not found (INTEL_MKL_DIR='$ENV{INTEL_MKL_DIR}')")
  endif()
  add_compile_options(-DMKL_HAS_SBGEMM -DMKL_HAS_SHGEMM)
  include_directories(AFTER SYSTEM "${MKL_INCLUDE_DIR}")
  set(AT_MKL_ENABLED 1)
elseif(BLAS STREQUAL "Generic")
  set(AT_MKL_ENABLED 0)
else()
  message(FATAL_ERROR "BLAS=${BLAS}: the stand-in models Generic and MKL")
endif()
# pocketfft serves the FFTs wherever MKL does not (2.6.0's Dependencies.cmake: AT_POCKETFFT_ENABLED 1 if NOT
# AT_MKL_ENABLED), so a source testing "AT_MKL_ENABLED() || AT_POCKETFFT_ENABLED()" reads the same under both
if(AT_MKL_ENABLED)
  set(AT_POCKETFFT_ENABLED 0)
else()
  set(AT_POCKETFFT_ENABLED 1)
endif()
