"""The release bump: one layer above ``maintainer`` and ``proofs``, since it uses both
(docs/reference/bump.md)."""
