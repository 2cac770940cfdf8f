// libtorch: no code, only NEEDED entries (upstream compiles an empty C++ file for it).
