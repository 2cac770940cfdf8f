"""The real conda builders build the recipe offline (``real-build``): rattler-build builds recipe-v1/ and
conda-build builds recipe/ (``real_build``, ``real_build_conda``) from a local channel (``local_channel``),
watched in a process group of their own (``build_watch``); ``package_diff`` compares their packages.
"""
