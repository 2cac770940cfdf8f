double core_root(double x);
double bindings_call(double x) { return core_root(x); }
