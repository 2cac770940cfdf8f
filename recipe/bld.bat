@REM conda-build runs this on Windows for the top-level recipe (libtorch-split, megabuild pass 1) and for every
@REM output with `script: bld.bat`: the counterpart of build.sh. All logic lives in the megabuild driver
@REM (recipe/megabuild, standard library only). It runs under the build environment's Python,
@REM %BUILD_PREFIX%\python.exe (conda-build's python_bin on win), because not every output has python in its
@REM host requirements (%PYTHON% is only set where it does).
@echo on
setlocal
if defined PYTHONPATH (
    set "PYTHONPATH=%RECIPE_DIR%;%PYTHONPATH%"
) else (
    set "PYTHONPATH=%RECIPE_DIR%"
)
"%BUILD_PREFIX%\python.exe" -m megabuild %*
if errorlevel 1 exit 1
