"""Writing files safely: atomic replacement, recognisable temporary files, run locks.

Every file bayescal writes (model files, posteriors, calibrated scores,
reports, the experiment cache) goes through :func:`atomic_write`: the content
is produced under a temporary name in the target directory and moved into
place with :func:`os.replace`, so a reader never sees a half-written file.

Temporary files are named ``.bayescal-tmp-<host>-<pid>-<token>-<name>``
(``<host>``: 8 hex digits of a hash of the host name). A process that dies
without cleaning up (``SIGKILL``, power loss) leaves such a file behind; the
next write into the same directory removes those of this host whose process
no longer exists (:func:`remove_stale_temp_files`), and never touches the
temporary files of a live process or of another host.

:class:`DirectoryLock` keeps two long runs (``bayescal reproduce``) from
writing into one output directory at the same time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import shutil
import socket
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "TEMP_PREFIX",
    "DirectoryLock",
    "LockedError",
    "atomic_write",
    "atomic_write_dir",
    "read_npy",
    "remove_stale_temp_files",
    "temp_path",
    "write_bytes",
    "write_error",
]

#: Prefix of every temporary file bayescal creates.
TEMP_PREFIX = ".bayescal-tmp-"


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def temp_path(target: str | os.PathLike[str]) -> Path:
    """A fresh temporary name beside ``target`` (not created)."""
    target = Path(target)
    token = secrets.token_hex(4)
    return target.with_name(f"{TEMP_PREFIX}{_host_tag()}-{os.getpid()}-{token}-{target.name}")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:  # e.g. not supported: assume alive, never delete
        return True
    return True


def remove_stale_temp_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporary files (and directories) of dead bayescal processes of this host.

    Only the entries of ``directory`` itself are looked at.

    Returns
    -------
    list of Path
        The files removed.
    """
    directory = Path(directory)
    removed: list[Path] = []
    try:
        candidates = [p for p in directory.iterdir() if p.name.startswith(TEMP_PREFIX)]
    except OSError:
        return removed
    host = _host_tag()
    for p in candidates:
        parts = p.name[len(TEMP_PREFIX):].split("-", 3)
        if len(parts) < 4 or parts[0] != host or not parts[1].isdigit():
            continue
        if _pid_alive(int(parts[1])):
            continue
        try:
            if p.is_dir() and not p.is_symlink():  # a report's temporary directory
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], Any], *,
                 overwrite: bool = False) -> Path:
    """Write ``path`` through a temporary file in the same directory.

    ``write(tmp_path)`` produces the content; only when it returns is the file
    moved to ``path`` (:func:`os.replace`, atomic on POSIX). On any error,
    ``KeyboardInterrupt`` included, the temporary file is removed and ``path``
    is untouched. Stale temporary files of dead processes are removed first
    (:func:`remove_stale_temp_files`).

    Parameters
    ----------
    path : path-like
        The file to write.
    write : callable
        Called with the temporary path; must create that file.
    overwrite : bool, default=False
        Replace an existing ``path``.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False.
    IsADirectoryError
        If ``path`` is a directory.
    FileNotFoundError
        If the directory of ``path`` does not exist.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a file")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists (use --force / overwrite=True to replace it)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise FileNotFoundError(f"output directory {parent} {what} (writing {path})")
    remove_stale_temp_files(parent)
    tmp = temp_path(path)
    try:
        write(tmp)
        if not tmp.is_file():
            raise OSError(f"writing {path} produced no file")
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_error(path, exc) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_error(path: str | os.PathLike[str], exc: OSError) -> OSError:
    """``exc`` of a failed write reworded to name ``path``, the file the user asked for.

    A system error (``exc.errno`` set: a full disk, a read-only file system,
    a permission) names the temporary file it hit, or nothing; the result
    says ``cannot write <path>: <reason>`` on one line and keeps the class
    and ``errno`` of ``exc``. An error without ``errno`` (bayescal's own
    message) is returned unchanged.
    """
    if exc.errno is None:
        return exc
    reason = exc.strerror or os.strerror(exc.errno)
    error = type(exc)(f"cannot write {path}: {reason}")
    error.errno = exc.errno
    return error


def write_bytes(path: str | os.PathLike[str], data: bytes, *, overwrite: bool = False) -> Path:
    """:func:`atomic_write` of a bytes object."""
    return atomic_write(path, lambda p: p.write_bytes(data), overwrite=overwrite)


def atomic_write_dir(directory: str | os.PathLike[str], files: dict[str, bytes]) -> Path:
    """Write ``files`` (name to content) into ``directory``: all of them or none.

    The files are written into a temporary directory beside ``directory``
    and moved into place at the end: the temporary directory itself becomes
    ``directory`` when that does not exist yet, else each file is moved into
    it (:func:`os.replace`, replacing a file of the same name; other files
    of ``directory`` are kept). On any error the temporary directory is
    removed and ``directory`` is as it was.

    Parameters
    ----------
    directory : path-like
        The directory to create or to write into.
    files : dict of str to bytes
        Plain file names (no directories) and their content.

    Returns
    -------
    Path
        ``directory``.

    Raises
    ------
    OSError
        ``"cannot write <directory>/<name>: <reason>"`` when a write fails.
    """
    directory = Path(directory)
    parent = directory.parent if str(directory.parent) else Path(".")
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise FileNotFoundError(f"output directory {parent} {what} (writing {directory})")
    remove_stale_temp_files(parent)
    tmp = temp_path(directory)
    target = directory  # what a failure is reported on
    try:
        tmp.mkdir()
        for name, data in files.items():
            target = directory / name
            (tmp / name).write_bytes(data)
        target = directory
        _move_into_place(tmp, directory, list(files))
    except OSError as exc:
        raise write_error(target, exc) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # already gone when renamed into place
    return directory


def _move_into_place(tmp: Path, directory: Path, names: list[str]) -> None:
    """Rename ``tmp`` to ``directory``, or move its files ``names`` into an existing one."""
    if not directory.exists():
        os.replace(tmp, directory)
        return
    for name in names:
        os.replace(tmp / name, directory / name)


def read_npy(path: str | os.PathLike[str]) -> Any:
    """Read a ``.npy`` file whole, or refuse it in one line naming it.

    The header is checked against the size of the file before anything is
    allocated, so a header claiming more data than the file holds (10^12
    rows, say) is refused as such rather than as a ``MemoryError``. Object
    arrays (pickles) are refused.

    Parameters
    ----------
    path : path-like
        The ``.npy`` file.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    ValueError
        If the file is not a ``.npy`` file, or its header and size disagree.
    """
    import numpy as np
    from numpy.lib import format as npy

    path = Path(path)
    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    with open(path, "rb") as f:
        try:
            version = npy.read_magic(f)
            if version not in readers:
                raise ValueError(f"format version {version} is not supported")
            shape, fortran, dtype = readers[version](f)
        except (ValueError, SyntaxError, TypeError) as exc:
            raise ValueError(f"{path}: not a .npy file ({' '.join(str(exc).split())})"
                             ) from None
        if dtype.hasobject:
            raise ValueError(f"{path}: holds Python objects (a pickle), which bayescal does not "
                             "read; save a numeric array")
        need = math.prod(shape) * dtype.itemsize
        have = os.fstat(f.fileno()).st_size - f.tell()
        if need != have:
            raise ValueError(f"{path}: its header claims shape {shape} of {dtype} ({need} bytes) "
                             f"but the file holds {have} bytes of data (truncated or damaged)")
        data = np.fromfile(f, dtype=dtype, count=math.prod(shape))
    return data.reshape(shape, order="F" if fortran else "C")


# ---------------------------------------------------------------------------
# run locks
# ---------------------------------------------------------------------------
class LockedError(RuntimeError):
    """Another live process holds the lock of a directory."""


def _try_lock(fd: int) -> bool:
    """Non-blocking exclusive lock of an open file; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class DirectoryLock:
    """Exclusive lock on a directory for one process, recorded in a lock file.

    The lock is an advisory ``flock`` on ``<directory>/<name>``, so it is
    released by the operating system when its process ends, however it ends
    (``SIGKILL`` included): a lock file left by a dead process never blocks a
    later run. The file records the holder (pid, host, start time, command)
    so that the error of a second run says who holds it.

    Parameters
    ----------
    directory : path-like
        Directory to lock (created if missing).
    name : str, default="bayescal.lock"
        Lock file name.

    Raises
    ------
    LockedError
        From :meth:`acquire` (or ``with``) when a live process holds the lock.
    """

    def __init__(self, directory: str | os.PathLike[str], name: str = "bayescal.lock") -> None:
        self.directory = Path(directory)
        self.path = self.directory / name
        self._fd: int | None = None
        self._created = False

    def _holder(self) -> str:
        try:
            info = json.loads(self.path.read_text())
            return (f"pid {info.get('pid')} on {info.get('host')}, started "
                    f"{info.get('started')}: {info.get('command')}")
        except (OSError, ValueError, AttributeError):
            return "holder unknown"

    def acquire(self) -> DirectoryLock:
        """Take the lock or raise :class:`LockedError`."""
        if self.directory.exists() and not self.directory.is_dir():
            raise NotADirectoryError(f"{self.directory} exists and is not a directory")
        self._created = not self.directory.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not _try_lock(fd):
                os.close(fd)
                raise LockedError(
                    f"{self.directory} is in use by another bayescal run ({self._holder()}); "
                    f"wait for it to finish or use another output directory"
                ) from None
            # the file may have been removed by the previous holder between our
            # open and our lock: then we hold a lock on an unlinked file; retry
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            try:
                previous = json.loads(os.read(fd, 1 << 16) or b"{}")
            except ValueError:
                previous = {}
            if previous.get("pid"):
                warnings.warn(
                    f"{self.path}: the previous run (pid {previous.get('pid')} on "
                    f"{previous.get('host')}, started {previous.get('started')}) ended without "
                    "releasing its lock (killed?); taking it over",
                    UserWarning, stacklevel=2,
                )
            record = {
                "pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": " ".join(sys.argv),
            }
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(record).encode())
            os.fsync(fd)
            self._fd = fd
            return self
        raise LockedError(f"could not lock {self.path}: it keeps being replaced")

    def release(self) -> None:
        """Release the lock and remove the lock file."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.path.unlink(missing_ok=True)
        except OSError:  # Windows cannot remove an open file; the lock still goes
            pass
        finally:
            os.close(fd)  # closing releases the flock
        if self._created:  # a run that failed before writing anything leaves nothing
            with contextlib.suppress(OSError):
                self.directory.rmdir()  # only succeeds when empty

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
