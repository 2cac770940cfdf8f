#include <ATen/Context.h>

#include <dlfcn.h>

namespace at {
DynamicLibrary::DynamicLibrary(const char* name) : handle(dlopen(name, RTLD_NOW | RTLD_GLOBAL)) {}
DynamicLibrary::~DynamicLibrary() = default;  // like upstream, never unloaded
void* DynamicLibrary::sym(const char* name) const { return handle ? dlsym(handle, name) : nullptr; }
}  // namespace at
