double core_root(double x) { return x * 0.5; }
