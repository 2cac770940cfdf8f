"""Stand-in (test double) of torch.nn: present so that the package test's import list finds it,
as in the 2.13.0 wheel (torch/nn/__init__.py); it models nothing of it."""
