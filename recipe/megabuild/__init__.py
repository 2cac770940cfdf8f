"""megabuild: the build driver conda-build runs (through recipe/build.sh) for every output of the recipe.

Standard library only, Python >= 3.10: it runs under ${BUILD_PREFIX}/bin/python inside conda-build's
environments. ``python -m megabuild --help`` explains the passes; docs/reference/megabuild.md has the details.
"""
