"""The conda-build emulation: line selectors, variant files and pinning, the used-variable scan and the
render of ``recipe/meta.yaml`` for one configuration. Imports only ``common``.
"""
