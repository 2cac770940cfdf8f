"""Real PyTorch wheels staged the way the megabuild stages (``wheel-layout``), and the linkage check of
staged packages (``linkage``, with the provider tables of ``runtime_libraries``).
"""
