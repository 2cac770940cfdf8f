namespace at::native {
int cholesky_batched_lib(int n) { return n * n; }
}  // namespace at::native
