"""Writing files: atomic, recognisable temporary files, stale ones cleaned, run locks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayescal._files import (
    TEMP_PREFIX,
    DirectoryLock,
    LockedError,
    atomic_write,
    remove_stale_temp_files,
    temp_path,
)
from bayescal.cli import main
from bayescal.datasets import make_dirgen

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    def half(p: Path) -> None:
        p.write_bytes(b"partial")
        raise RuntimeError("disk full")

    for exc in (RuntimeError, KeyboardInterrupt):
        def fail(p: Path, exc=exc) -> None:
            p.write_bytes(b"partial")
            raise exc("stop")

        with pytest.raises(exc):
            atomic_write(tmp_path / "out.json", fail)
    (tmp_path / "keep.json").write_text("old")
    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "keep.json", half, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]
    assert (tmp_path / "keep.json").read_text() == "old"


def test_targets_that_are_not_files(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory, not a file"):
        atomic_write(tmp_path / "d", lambda p: p.write_text("x"), overwrite=True)
    with pytest.raises(FileNotFoundError, match="output directory .*nowhere does not exist"):
        atomic_write(tmp_path / "nowhere" / "x.json", lambda p: p.write_text("x"))
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileNotFoundError, match="output directory .*f is not a directory"):
        atomic_write(tmp_path / "f" / "x.json", lambda p: p.write_text("x"))


def test_stale_temporary_files_of_dead_processes_are_removed(tmp_path: Path) -> None:
    own = temp_path(tmp_path / "m.json")
    assert own.name.startswith(TEMP_PREFIX) and own.name.endswith("-m.json")
    host, pid = own.name[len(TEMP_PREFIX):].split("-")[:2]
    assert int(pid) == os.getpid()
    dead = tmp_path / f"{TEMP_PREFIX}{host}-{_dead_pid()}-0a0b0c0d-m.json"
    alive = tmp_path / f"{TEMP_PREFIX}{host}-{os.getppid()}-0a0b0c0d-m.json"
    other_host = tmp_path / f"{TEMP_PREFIX}00000000-{_dead_pid()}-0a0b0c0d-m.json"
    unrelated = tmp_path / ".m.json.swp"
    for p in (dead, alive, other_host, unrelated):
        p.write_text("x")
    assert remove_stale_temp_files(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (alive, other_host, unrelated))


def test_sigkill_during_a_write_is_cleaned_by_the_next_run(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "from bayescal._files import atomic_write\n"
        "def slow(p):\n"
        "    p.write_bytes(b'x' * 10_000_000)\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(120)\n"
        f"atomic_write({str(tmp_path / 'model.json')!r}, slow)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=ENV)
    assert proc.stdout.readline() == "writing\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(TEMP_PREFIX) and left.stat().st_size == 10_000_000
    q, y, _, _ = make_dirgen(200, 3, rng=0)
    np.savez(tmp_path / "s.npz", probs=q, y=y)
    assert main(["fit", str(tmp_path / "s.npz"), "--method", "temperature",
                 "-o", str(tmp_path / "model.json")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json", "s.npz"]


def test_directory_lock_refuses_a_second_holder_and_survives_a_killed_one(
        tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from bayescal._files import DirectoryLock\n"
        f"lock = DirectoryLock({str(tmp_path)!r}).acquire()\n"
        "print('locked', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=ENV)
    try:
        assert proc.stdout.readline() == "locked\n"
        info = json.loads((tmp_path / "bayescal.lock").read_text())
        assert info["pid"] == proc.pid
        with pytest.raises(LockedError, match=rf"in use by another bayescal run \(pid "
                                              rf"{proc.pid} on "):
            DirectoryLock(tmp_path).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # the killed holder's file is still there, but its lock went with the process
    assert (tmp_path / "bayescal.lock").exists()
    with pytest.warns(UserWarning, match=rf"previous run \(pid {proc.pid} .* ended without "
                                         "releasing its lock"):
        lock = DirectoryLock(tmp_path).acquire()
    assert json.loads((tmp_path / "bayescal.lock").read_text())["pid"] == os.getpid()
    lock.release()
    assert not (tmp_path / "bayescal.lock").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with DirectoryLock(tmp_path):
            pass


def test_lock_of_a_new_directory_leaves_nothing_when_unused(tmp_path: Path) -> None:
    with DirectoryLock(tmp_path / "out"):
        assert (tmp_path / "out").is_dir()
    assert not (tmp_path / "out").exists()
    with DirectoryLock(tmp_path / "out2"):
        (tmp_path / "out2" / "result").write_text("x")
    assert (tmp_path / "out2" / "result").exists()
