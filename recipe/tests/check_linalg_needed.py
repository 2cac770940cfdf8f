"""Package test of libtorch-cuda-linalg: is the library linked to libmagma exactly in the MAGMA build?

Reads the NEEDED entries of the library's ELF dynamic section (standard library only, no binutils in the
test environment) and compares them with the build's magma_variant.

    python check_linalg_needed.py $PREFIX/lib/libtorch_cuda_linalg.so --magma=magma
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5


class NotAnElfLibrary(ValueError):
    """The file is not a 64-bit little-endian ELF file with a dynamic section."""


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared library, in order."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise NotAnElfLibrary(f"{path} is not a 64-bit little-endian ELF file")
    phoff, phentsize, phnum = struct.unpack_from("<Q", data, 0x20)[0], *struct.unpack_from("<HH", data, 0x36)
    segments = [struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize) for i in range(phnum)]
    loads = [(s[3], s[2], s[5]) for s in segments if s[0] == PT_LOAD]  # (vaddr, offset, filesz)

    def file_offset(address: int) -> int:
        for vaddr, offset, filesz in loads:
            if vaddr <= address < vaddr + filesz:
                return address - vaddr + offset
        raise NotAnElfLibrary(f"{path}: address {address:#x} is in no loaded segment")

    dynamic = [s for s in segments if s[0] == PT_DYNAMIC]
    if not dynamic:
        raise NotAnElfLibrary(f"{path} has no dynamic section")
    _, _, offset, _, _, filesz, _, _ = dynamic[0]
    entries = [struct.unpack_from("<qQ", data, offset + i * 16) for i in range(filesz // 16)]
    entries = entries[: next((i for i, (tag, _) in enumerate(entries) if tag == DT_NULL), len(entries))]
    strings = file_offset(next(value for tag, value in entries if tag == DT_STRTAB))
    names = []
    for tag, value in entries:
        if tag == DT_NEEDED:
            start = strings + value
            names.append(data[start : data.index(b"\0", start)].decode())
    return names


def magma_libraries(path: Path) -> list[str]:
    return [name for name in needed_libraries(path) if name.startswith("libmagma")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", type=Path, help="path of libtorch_cuda_linalg.so")
    parser.add_argument(
        "--magma", choices=("magma", "nomagma"), required=True, help="the build's magma_variant"
    )
    args = parser.parse_args(argv)
    if not args.library.is_file():
        print(f"FAIL: {args.library} does not exist", file=sys.stderr)
        return 1
    try:
        magma = magma_libraries(args.library)
    except NotAnElfLibrary as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    if (args.magma == "magma") != bool(magma):
        expected = "linked to libmagma" if args.magma == "magma" else "not linked to libmagma"
        print(
            f"FAIL: {args.library} should be {expected}; NEEDED: {needed_libraries(args.library)}",
            file=sys.stderr,
        )
        return 1
    print(f"OK: {args.library.name} ({args.magma}) NEEDED {magma or 'no libmagma'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
