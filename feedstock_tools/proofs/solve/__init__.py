"""What a real conda solver installs from the recipe's packages (``solve-check``): the channel made of the
rendered outputs (``solve_channel``), the requests by machine and their verdicts (``solve_check``), and
py-rattler's solver in a child process (``solver_process``).
"""
