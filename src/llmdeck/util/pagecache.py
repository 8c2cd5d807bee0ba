"""Page cache of given files: how much of them is resident (``mincore``), and dropping it without root.

On unified memory (GB10) page cache left by a download or a copy is counted by vLLM's start as memory
in use and can shrink the KV budget or fail the start (vllm issue #48140; NVIDIA/xr-ai PR #462 fixed it
the same way): ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` asks the kernel to drop the clean pages
of one file, and needs no privilege beyond reading the file. Dirty pages are written back first
(``fdatasync``), else the kernel keeps them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.mmap.argtypes += [ctypes.c_long]
        lib.mmap.restype = ctypes.c_void_p
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        _libc = lib
    return _libc


def _oserror(path: Path) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, os.strerror(err), str(path))


def resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in page cache now (``mincore`` over a read-only mapping); 0 for an empty file.

    Mapping a file faults no page in: only touching it would, and mincore only reads the page table."""
    size = path.stat().st_size
    if size == 0:
        return 0
    lib = _c()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = lib.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise _oserror(path)
        try:
            pages = (size + _PAGE - 1) // _PAGE
            vec = (ctypes.c_ubyte * pages)()
            if lib.mincore(addr, size, vec) != 0:
                raise _oserror(path)
            count = sum(b & 1 for b in bytes(vec))
        finally:
            lib.munmap(addr, size)
    finally:
        os.close(fd)
    return min(size, count * _PAGE)


def drop(path: Path) -> None:
    """Ask the kernel to drop ``path``'s pages from page cache (no root needed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.access(path, os.W_OK):
            os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def files_under(paths: Iterable[Path]) -> Iterator[Path]:
    """Regular files at or under ``paths`` (symlinks resolved, as the Hugging Face cache uses them)."""
    seen: set[Path] = set()
    for root in paths:
        candidates = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in candidates:
            real = p.resolve()
            if real not in seen and real.is_file():
                seen.add(real)
                yield real


def drop_files(files: Iterable[Path]) -> int:
    """Drop each file's page cache; the bytes that were resident before (unreadable files skipped)."""
    total = 0
    for f in files:
        try:
            total += resident_bytes(f)
            drop(f)
        except OSError:
            continue
    return total
