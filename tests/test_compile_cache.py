"""The kernel cache's cubins are whole ELF images (gpu/compile.py elf_complete)."""

from __future__ import annotations

import struct

import pytest

from distprove.backends.gpu.compile import elf_complete


def _elf(phoff: int, phnum: int, shoff: int, shnum: int, length: int) -> bytes:
    """A 64-bit little-endian ELF header (program headers of 56 bytes, sections of 64) padded with
    0xAA to ``length`` bytes."""
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<QQ", head, 32, phoff, shoff)
    struct.pack_into("<HHHH", head, 54, 56, phnum, 64, shnum)
    return bytes(head) + b"\xaa" * (length - 64)


def test_short_image_gets_its_zero_bytes() -> None:
    """A header table ending one byte past the image (CuPy's getCUBIN) is completed with a zero."""
    image = _elf(phoff=1000, phnum=5, shoff=600, shnum=6, length=1279)  # programs end at 1280
    whole = elf_complete(image)
    assert len(whole) == 1280 and whole[:1279] == image and whole[1279:] == b"\0"
    later_sections = _elf(phoff=200, phnum=2, shoff=400, shnum=10, length=1000)  # sections end at 1040
    assert elf_complete(later_sections) == later_sections + bytes(40)


def test_whole_and_foreign_images_are_unchanged() -> None:
    whole = _elf(phoff=1000, phnum=5, shoff=600, shnum=6, length=1280)
    assert elf_complete(whole) == whole
    assert elf_complete(whole + b"\x01") == whole + b"\x01"
    assert elf_complete(b"// PTX text, not ELF" * 8) == b"// PTX text, not ELF" * 8
    assert elf_complete(b"\x7fELF") == b"\x7fELF"
    big_endian = bytearray(whole[:1279])
    big_endian[5] = 2
    assert elf_complete(bytes(big_endian)) == bytes(big_endian)


def test_nvrtc_cubin_is_whole() -> None:
    """Where NVRTC is installed: a compiled module's cubin is as long as its ELF header says."""
    pytest.importorskip("cupy")
    from distprove.backends.gpu.compile import _nvrtc_compile

    try:
        cubin = _nvrtc_compile('extern "C" __global__ void k(int* x) { x[0] = 1; }', "k",
                               ["--gpu-architecture=sm_90"])
    except Exception as exc:  # no libnvrtc on this machine (CuPy without the CUDA runtime)
        pytest.skip(f"NVRTC not usable here: {exc}")
    assert elf_complete(cubin) == cubin
    phoff, shoff = struct.unpack_from("<QQ", cubin, 32)
    _, phnum, _, shnum = struct.unpack_from("<HHHH", cubin, 54)
    assert len(cubin) == max(phoff + 56 * phnum, shoff + 64 * shnum)
