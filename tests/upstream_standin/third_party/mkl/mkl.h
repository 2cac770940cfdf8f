// Test double of MKL's public header: the one call the stand-in's CPU BLAS code makes.
#pragma once
extern "C" {
int mkl_get_max_threads();
}
