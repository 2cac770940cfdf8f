// Test double of the C++ frontend umbrella header: what a find_package(Torch) consumer includes.
#pragma once
#include <ATen/Context.h>
#include <c10/core/Device.h>
