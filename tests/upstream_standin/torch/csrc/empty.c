/* libtorch_global_deps: no code, only NEEDED entries (preloaded with RTLD_GLOBAL by torch/__init__.py). */
