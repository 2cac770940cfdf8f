namespace at::native {
int triangular_solve_blas(int n) { return n + 1; }
}  // namespace at::native
