@REM Build one win-64 configuration on a Windows runner (CI, or a maintainer's machine through
@REM build-locally.py), with a private Miniforge in MINIFORGE_HOME. Environment contract: docs/reference/ci.md.
@REM Required: CONFIG. The decisions (build front end, its packages, the test policy) come from
@REM .scripts/ci_settings.py, as for build_steps.sh and run_osx_build.sh; this file only runs the steps.
@REM No labels or "call :sub": cmd.exe finds labels unreliably in a file with LF line ends, which this is.
@echo on
setlocal enableextensions
if "%CONFIG%"=="" (
    echo error: CONFIG is not set: name a .ci_support configuration, e.g. win_64_cuda_compiler_versionNone
    exit /b 2
)
for %%A in ("%~dp0..") do set "FEEDSTOCK_ROOT=%%~fA"
set "RECIPE_ROOT=%FEEDSTOCK_ROOT%\recipe"
set "CONFIG_FILE=%FEEDSTOCK_ROOT%\.ci_support\%CONFIG%.yaml"
if "%MINIFORGE_HOME%"=="" set "MINIFORGE_HOME=%USERPROFILE%\Miniforge3"
if "%MINIFORGE_HOME:~-1%"=="\" set "MINIFORGE_HOME=%MINIFORGE_HOME:~0,-1%"
if /i "%CI%"=="github_actions" (
    set "FEEDSTOCK_NAME=%GITHUB_REPOSITORY:*/=%"
    set "GIT_BRANCH=%GITHUB_REF_NAME%"
    if /i "%GITHUB_EVENT_NAME%"=="pull_request" (set "IS_PR_BUILD=True") else (set "IS_PR_BUILD=False")
)
if "%FEEDSTOCK_NAME%"=="" for %%A in ("%FEEDSTOCK_ROOT%") do set "FEEDSTOCK_NAME=%%~nxA"
if "%IS_PR_BUILD%"=="" set "IS_PR_BUILD=False"

echo ::group::Provisioning Miniforge
if not exist "%MINIFORGE_HOME%\Scripts\conda.exe" (
    powershell -NoProfile -ExecutionPolicy Bypass -Command "(New-Object Net.WebClient).DownloadFile('https://github.com/conda-forge/miniforge/releases/latest/download/Miniforge3-Windows-x86_64.exe', '%TEMP%\Miniforge3-Windows-x86_64.exe')"
    if errorlevel 1 exit /b 1
    start /wait "" "%TEMP%\Miniforge3-Windows-x86_64.exe" /InstallationType=JustMe /RegisterPython=0 /S /D=%MINIFORGE_HOME%
    if errorlevel 1 exit /b 1
)
call "%MINIFORGE_HOME%\Scripts\activate.bat"
if errorlevel 1 exit /b 1
for /f "usebackq delims=" %%S in (`python "%~dp0ci_settings.py" build-command`) do set "BUILD_COMMAND=%%S"
for /f "usebackq delims=" %%S in (`python "%~dp0ci_settings.py" build-deps`) do set "BUILD_DEPS=%%S"
if "%BUILD_COMMAND%"=="" exit /b 1
conda install --yes --quiet --channel conda-forge --strict-channel-priority pip %BUILD_DEPS% "conda-forge-ci-setup=4" "conda-build>=24.1"
if errorlevel 1 exit /b 1
echo ::endgroup::

echo ::group::Configuring conda
setup_conda_rc "%FEEDSTOCK_ROOT%" "%RECIPE_ROOT%" "%CONFIG_FILE%"
if errorlevel 1 exit /b 1
call run_conda_forge_build_setup
if errorlevel 1 exit /b 1
@REM conda-forge.yml's test policy for this configuration on this machine (nothing for a native win-64 build)
python "%~dp0ci_settings.py" test-options "%CONFIG_FILE%" > "%TEMP%\test_options_%CONFIG%.txt"
if errorlevel 1 exit /b 1
set "TEST_OPTIONS="
for /f "usebackq delims=" %%S in ("%TEMP%\test_options_%CONFIG%.txt") do set "TEST_OPTIONS=%%S"
set "EXTRA_META="
if not "%flow_run_id%"=="" set "EXTRA_META=--extra-meta flow_run_id=%flow_run_id% remote_url=%remote_url% sha=%sha%"
echo ::endgroup::

%BUILD_COMMAND% "%RECIPE_ROOT%" -m "%CONFIG_FILE%" --suppress-variables %TEST_OPTIONS% %EXTRA_META%
if errorlevel 1 exit /b 1

echo ::group::Validating outputs
validate_recipe_outputs "%FEEDSTOCK_NAME%"
if errorlevel 1 exit /b 1
echo ::endgroup::
if /i "%UPLOAD_PACKAGES%"=="False" exit /b 0
if /i not "%IS_PR_BUILD%"=="False" exit /b 0
echo ::group::Uploading packages
upload_package --validate --feedstock-name="%FEEDSTOCK_NAME%" "%FEEDSTOCK_ROOT%" "%RECIPE_ROOT%" "%CONFIG_FILE%"
if errorlevel 1 exit /b 1
echo ::endgroup::
