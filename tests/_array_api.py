"""scikit-learn's array-API check, run where it can run: a process with ``SCIPY_ARRAY_API=1``.

scikit-learn skips ``check_array_api_input`` unless SciPy's array-API mode was
switched on before SciPy was first imported, which a test process cannot do
any more. The checks are therefore pickled to one subprocess started with the
variable set, and each test reports its own result: a real pass or failure,
never a skip.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Any

_RUNNER = """
import pickle, sys, traceback, warnings
warnings.simplefilter("ignore")
pairs = pickle.load(sys.stdin.buffer)
out = []
for estimator, check in pairs:
    try:
        check(estimator)
        out.append(None)
    except Exception:
        out.append(traceback.format_exc())
sys.stdout.buffer.write(pickle.dumps(out))
"""


def is_array_api_check(check: Any) -> bool:
    """Whether a check of ``parametrize_with_checks`` is one of the array-API checks."""
    return getattr(check, "func", check).__name__.startswith("check_array_api")


def array_api_pairs(decorator: Any) -> list[tuple[Any, Any]]:
    """The ``(estimator, check)`` array-API pairs of a ``parametrize_with_checks`` decorator."""
    pairs = []
    for param in decorator.mark.args[1]:
        estimator, check = param.values if hasattr(param, "values") else param
        if is_array_api_check(check):
            pairs.append((estimator, check))
    return pairs


def run_array_api_checks(pairs: list[tuple[Any, Any]]) -> list[str | None]:
    """Run the pairs in one ``SCIPY_ARRAY_API=1`` process: ``None`` or a traceback each."""
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER], input=pickle.dumps(pairs), capture_output=True,
        env=env, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"the array-API check process failed (exit {proc.returncode}):\n"
            f"{proc.stderr.decode(errors='replace')[-3000:]}"
        )
    return pickle.loads(proc.stdout)


def result_of(pairs: list[tuple[Any, Any]], results: list[str | None], estimator: Any,
              check: Any) -> str | None:
    """The result of the pair holding exactly these ``estimator`` and ``check`` objects."""
    for (e, c), result in zip(pairs, results, strict=True):
        if e is estimator and c is check:
            return result
    raise LookupError(f"no array-API result for {estimator!r}")
