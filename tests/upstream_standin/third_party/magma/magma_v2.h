// Test double of MAGMA's public header: the two calls the stand-in's linalg library makes.
#pragma once
extern "C" {
int magma_init();
int magma_version_major();
}
