"""Small helpers every part of the tools shares: the one error type, path checks, run locks, the way
into ``recipe/`` for the build driver's modules. Imports nothing else of ``feedstock_tools``.
"""
