"""Documented defaults agree with the code (pure text: nothing is fitted).

1. Every public estimator's docstring says ``name : type, default=value`` with
   the value of its signature; a parameter documented "as in :class:`X`" has
   X's default or states its own beside its name; every parameter is
   documented.
2. The method tables (the registry's module docstring, the user guide's
   index) name each method as the estimator and parameters the registry
   builds.
3. The narrative pages (README.md, docs/**/*.md, the markdown cells of the
   notebooks) hold none of the stale phrases of :data:`RULES`, each tied to
   the current default it protects: a rule whose default changed fails too,
   so that it is rewritten rather than left guarding nothing.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

import bayescal
from bayescal.calibrators.registry import METHODS

ROOT = Path(__file__).resolve().parents[1]

ESTIMATORS = (
    "DirichletCalibrator", "MatrixScaler", "VectorScaler", "TemperatureScaler",
    "GenerativeDirichletCalibrator", "BayesianDirichletCalibrator",
    "BayesianGenerativeCalibrator", "CalibratedClassifier", "SigmoidCalibrator",
    "BetaCalibrator", "IsotonicCalibrator", "BinningCalibrator",
)

#: Known contradictions awaiting a fix in code edited elsewhere, by (class,
#: parameter): each must still be a contradiction (the test fails once it is
#: fixed, so that the entry is removed).
KNOWN: dict[tuple[str, str], str] = {
}

#: Names a docstring may use for a default value.
SYMBOLS = {"EPS": bayescal.EPS, "None": None, "True": True, "False": False}


def _defaults(cls: type) -> dict[str, object]:
    return {n: p.default for n, p in inspect.signature(cls).parameters.items()}


def _value(text: str) -> object:
    text = text.strip()
    if text in SYMBOLS:
        return SYMBOLS[text]
    return ast.literal_eval(text)


def _values(text: str, count: int) -> list[object]:
    """``count`` comma-separated default values (tuples kept whole)."""
    if count == 1:
        return [_value(text)]
    parts = ast.parse(f"({text},)", mode="eval").body.elts
    return [_value(ast.get_source_segment(f"({text},)", p)) for p in parts]


def _parameters_section(doc: str) -> str:
    match = re.search(r"^Parameters\n-+\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)", doc, re.M | re.S)
    assert match, "no Parameters section"
    return match.group(1)


@dataclass
class Entry:
    names: list[str]
    header: str
    text: str


def _entries(section: str) -> list[Entry]:
    """The entries of a numpydoc Parameters section: an unindented header, indented text."""
    out: list[Entry] = []
    for line in section.splitlines():
        if line and not line[0].isspace():
            names = line.split(" : ", 1)[0]
            out.append(Entry([n.strip() for n in names.split(",")], line, ""))
        elif out:
            out[-1].text += " " + line.strip()
    return out


def _class(ref: str) -> type:
    return getattr(bayescal, ref.lstrip("~").rsplit(".", 1)[-1])


def _states_value(doc: str, name: str, value: object) -> bool:
    """Whether the docstring gives ``name`` the value ``value`` (e.g. "``tune="auto"`` is
    1000 here", "``target_accept`` of 0.8")."""
    shown = {repr(value), str(value)}
    if isinstance(value, float):
        shown.add(f"{value:g}")
    return any(re.search(rf"\b{re.escape(name)}\b.{{0,40}}?{re.escape(s)}(?![\w.])", doc, re.S)
               for s in shown)


def docstring_problems(cls: type) -> dict[tuple[str, str], str]:
    """Contradictions between ``cls``'s docstring and its signature, by (class, parameter)."""
    name = cls.__name__
    doc = inspect.getdoc(cls)
    sig = _defaults(cls)
    section = _parameters_section(doc)
    problems: dict[tuple[str, str], str] = {}
    documented: set[str] = set()
    for entry in _entries(section):
        documented.update(entry.names)
        default = re.search(r"\bdefault=(.*)$", entry.header)
        if default:
            for param, value in zip(entry.names, _values(default.group(1), len(entry.names)),
                                    strict=True):
                if param not in sig:
                    problems[name, param] = "documented but not a parameter"
                elif value != sig[param]:
                    problems[name, param] = (f"docstring says default={value!r}, the signature "
                                             f"{sig[param]!r}")
            continue
        ref = re.search(r"\b[Aa]s in :class:`([~\w.]+)`", entry.text)
        if ref is None:
            if " : " not in entry.header:
                problems[name, entry.header] = "an entry with neither a type nor a reference"
            continue
        other = _defaults(_class(ref.group(1)))
        for param in entry.names:
            if param not in sig:
                problems[name, param] = "documented but not a parameter"
            elif sig[param] != other.get(param) and not _states_value(doc, param, sig[param]):
                problems[name, param] = (
                    f"documented as in {ref.group(1)} (default {other.get(param)!r}), but its "
                    f"default is {sig[param]!r}, stated nowhere beside its name")
    shared = re.search(r"Every other parameter \((.*?)\) is that of\s+:class:`([~\w.]+)`",
                       section, re.S)
    if shared:
        other = _defaults(_class(shared.group(2)))
        for param in re.findall(r"``(\w+)``", shared.group(1)):
            documented.add(param)
            if param in sig and sig[param] != other.get(param):
                problems[name, param] = (f"said to be that of {shared.group(2)} "
                                         f"({other.get(param)!r}), but is {sig[param]!r}")
    for param in sorted(set(sig) - documented):
        problems[name, param] = "not documented"
    return problems


def test_every_public_estimator_is_checked() -> None:
    public = {n for n in bayescal.__all__
              if inspect.isclass(obj := getattr(bayescal, n)) and hasattr(obj, "fit")}
    assert public == set(ESTIMATORS)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_docstring_defaults_match_the_signature(name: str) -> None:
    problems = docstring_problems(getattr(bayescal, name))
    known = {key: why for key, why in KNOWN.items() if key[0] == name}
    assert set(known) <= set(problems), (
        f"fixed, remove from KNOWN: {sorted(set(known) - set(problems))}")
    unexpected = {key: why for key, why in problems.items() if key not in known}
    assert not unexpected, "\n".join(f"{c}.{p}: {why}" for (c, p), why in unexpected.items())


def test_the_parser_reads_every_form_used() -> None:
    # one entry naming two parameters, a tuple default, a symbol, a reference
    assert _values("1000, 4", 2) == [1000, 4]
    assert _values("(-4.0, 4.0)", 1) == [(-4.0, 4.0)]
    assert _values("EPS", 1) == [bayescal.EPS]
    assert _states_value('``tune="auto"`` is 1000 here', "tune", 1000)
    assert not _states_value("``tune`` as in X; 10000 rows", "tune", 1000)


def test_a_contradicted_or_missing_default_is_found() -> None:
    class Fake:
        """A calibrator.

        Parameters
        ----------
        a : int, default=1
            Kept.
        b : float, default=2.0
            Changed in the code, not here.
        tune, eps
            As in :class:`BayesianDirichletCalibrator` (``tune`` is 500 here).
        """

        def __init__(self, a=1, b=3.0, c=0, *, tune=500, eps=1e-3):
            pass

    assert set(docstring_problems(Fake)) == {("Fake", "b"), ("Fake", "c"), ("Fake", "eps")}


# ---------------------------------------------------------------------------
# the method tables
# ---------------------------------------------------------------------------
def _check_table_row(method: str, cls_name: str, args: str | None) -> list[str]:
    spec = METHODS[method]
    if spec.class_name != cls_name:
        return [f"{method}: the table says {cls_name}, the registry builds {spec.class_name}"]
    if args is None:
        return []
    cls = spec.load_class()
    call = ast.parse(f"f({args})", mode="eval").body
    shown = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    defaults = _defaults(cls)
    if {**defaults, **shown} != {**defaults, **spec.fixed}:
        return [f"{method}: the table says {cls_name}({args}), the registry builds "
                f"{cls_name}({', '.join(f'{k}={v!r}' for k, v in spec.fixed.items())})"]
    return []


def test_registry_docstring_table_names_what_the_registry_builds() -> None:
    from bayescal.calibrators import registry

    rows = re.findall(r"^``([\w-]+)``\s+``(\w+)(\(([^`]*)\))?``", registry.__doc__, re.M)
    assert {r[0] for r in rows} == set(METHODS)
    problems = [p for method, cls, parens, args in rows
                for p in _check_table_row(method, cls, args if parens else None)]
    assert not problems, problems


def test_user_guide_table_names_what_the_registry_builds() -> None:
    text = (ROOT / "docs" / "user_guide" / "index.md").read_text()
    rows = re.findall(r"^\| `([\w-]+)`( \(default\))? \| `(\w+)(\(([^`]*)\))?` \|", text, re.M)
    assert {r[0] for r in rows} == set(METHODS)
    problems = [p for method, _, cls, parens, args in rows
                for p in _check_table_row(method, cls, args if parens else None)]
    assert not problems, problems
    default = [method for method, mark, *_ in rows if mark]
    assert default == [bayescal.CalibratedClassifier().method]


# ---------------------------------------------------------------------------
# stale phrases in the narrative pages
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """A phrase that contradicts a current default.

    ``holds`` checks that default (a rule whose default changed fails, to be
    rewritten); ``pattern`` is searched in each paragraph (lines joined), and
    a paragraph matching ``unless`` is exempt.
    """

    name: str
    default: str
    holds: Callable[[], bool]
    pattern: str
    unless: str | None = None


def _sig(name: str, param: str) -> object:
    return _defaults(getattr(bayescal, name))[param]


_REG_NONE = r"""reg\s*=\s*["']none["']"""

RULES: tuple[Rule, ...] = (
    # The default floor of DirichletCalibrator (and of the `dirichlet` method) is
    # chosen by the evidence, EPS or 1/(k(n+1)): "floored at eps = 2.22e-16" as a
    # plain statement (README's last line, until issue 33) is stale.
    Rule("floor-is-eps", 'DirichletCalibrator(eps="auto")',
         lambda: _sig("DirichletCalibrator", "eps") == "auto",
         r"(?i)\bfloored at\s+`?\$?\\?(?:eps|epsilon)\s*=\s*2\.22"),
    # Matrix and vector scaling are penalised towards temperature scaling by
    # default (the estimators and the registry's `matrix`, `vector`); only
    # reg="none" is unpenalised (docs/user_guide/scaling.md said "a full,
    # unpenalised W ... it overfits").
    Rule("matrix-unpenalised", 'MatrixScaler(reg="structured"), registry "matrix"',
         lambda: _sig("MatrixScaler", "reg") == "structured"
         and METHODS["matrix"].fixed.get("reg") == "structured",
         r"(?i)matrix scaling[^.]{0,120}\bunpenali[sz]ed|\bunpenali[sz]ed\b[^.]{0,120}matrix "
         r"scaling",
         unless=_REG_NONE),
    Rule("vector-unpenalised", 'VectorScaler(reg="structured"), registry "vector"',
         lambda: _sig("VectorScaler", "reg") == "structured"
         and METHODS["vector"].fixed.get("reg") == "structured",
         r"(?i)vector scaling[^.]{0,120}\bunpenali[sz]ed|\bunpenali[sz]ed\b[^.]{0,120}vector "
         r"scaling",
         unless=_REG_NONE),
    # DirichletCalibrator's default penalty is the structured one, not ODIR or L2
    # (docs/generative_vs_discriminative.md: "ODIR and L2 choose their penalty by
    # 3-fold CV (the defaults of DirichletCalibrator)").
    Rule("odir-is-default", 'DirichletCalibrator(reg="structured")',
         lambda: _sig("DirichletCalibrator", "reg") == "structured",
         r"(?i)\b(?:ODIR|L2)\b[^.]*\(the defaults? of\s+`?DirichletCalibrator"),
    # ... and its internal cross-validation has 5 folds, not 3.
    Rule("default-3-fold", "DirichletCalibrator(cv=5)",
         lambda: _sig("DirichletCalibrator", "cv") == 5,
         r"(?i)\bdefault\s+3-fold|\b3-fold\b[^.]*\(the defaults? of"),
    # The generative fit's default prior="auto" chooses a prior strength by
    # cross-validation: it has a hyperparameter (the page said it had none).
    Rule("generative-no-hyperparameter", 'GenerativeDirichletCalibrator(prior="auto")',
         lambda: _sig("GenerativeDirichletCalibrator", "prior") == "auto",
         r"(?i)generative.*\bno hyperparameters?\b|\bno hyperparameters?\b.*generative"),
    # The default fit (structured penalty, strengths "auto") costs 0.2-0.3 CPU s at
    # k = 10 and 1.1-1.3 s at k = 100 (docs/benchmarks.md, Scale); docs/choosing.md
    # once said "about a second", when it took 12-20 s at k = 100.
    Rule("default-fit-about-a-second", 'DirichletCalibrator(reg="structured") with "auto"',
         lambda: _sig("DirichletCalibrator", "reg_lambda") == "auto",
         r"(?i)default fit takes about a second"),
    # `bayes` at its defaults (sampler="auto": the compiled sampler with the [fast]
    # extra) takes seconds at k = 10 once compiled, not "about 5 minutes per fit".
    Rule("bayes-minutes-at-k10", 'BayesianDirichletCalibrator(sampler="auto")',
         lambda: _sig("BayesianDirichletCalibrator", "sampler") == "auto",
         r"(?i)\bminutes per fit at \$?k\s*=\s*10\b"),
    # sampler="auto" runs the compiled sampler "jax" when the [fast] extra is
    # installed: nutpie is not the default sampler (notebook 02 said so).
    Rule("nutpie-is-default", 'BayesianDirichletCalibrator(sampler="auto") -> "jax"',
         lambda: _sig("BayesianDirichletCalibrator", "sampler") == "auto",
         r"(?i)\bnutpie\b[^.()]{0,40}\(the default\)|\bthe defaults?\b.{0,300}?\bnutpie "
         r"compiles the model"),
)


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _notebook_cells(path: Path) -> list[tuple[str, str]]:
    cells = json.loads(path.read_text())["cells"]
    return [(c["cell_type"], "".join(c["source"])) for c in cells]


def narrative_pages() -> dict[str, str]:
    """Every narrative page's text, by path (notebooks: their markdown cells)."""
    pages = {"README.md": (ROOT / "README.md").read_text()}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if "_build" not in path.parts:
            pages[str(path.relative_to(ROOT))] = path.read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        pages[str(path.relative_to(ROOT))] = "\n\n".join(
            src for kind, src in _notebook_cells(path) if kind == "markdown")
    return pages


def stale_phrases(pages: dict[str, str]) -> list[str]:
    found = []
    for path, text in pages.items():
        for paragraph in _paragraphs(text):
            for rule in RULES:
                match = re.search(rule.pattern, paragraph)
                if match and not (rule.unless and re.search(rule.unless, paragraph)):
                    found.append(f"{path}: [{rule.name}, the default is {rule.default}] "
                                 f"{paragraph[:200]}")
    return found


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_each_rule_guards_a_current_default(rule: Rule) -> None:
    assert rule.holds(), (f"the default behind rule {rule.name!r} ({rule.default}) changed: "
                          "rewrite the rule for the new default")


def test_narrative_pages_hold_no_stale_phrase() -> None:
    found = stale_phrases(narrative_pages())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("text", "rule"), [
    ("Probabilities are floored at `eps = 2.22e-16` before the logarithm.", "floor-is-eps"),
    ("**Matrix scaling** (`matrix`): a full,\nunpenalised $W$; it overfits.",
     "matrix-unpenalised"),
    ("ODIR and L2 choose their penalty by 3-fold CV (the defaults of\n`DirichletCalibrator`).",
     "odir-is-default"),
    ("The default 3-fold CV over the 36-point ODIR grid.", "default-3-fold"),
    ("The generative fit has no hyperparameter.", "generative-no-hyperparameter"),
    ("`bayes` takes about 5 minutes per fit at $k = 10$.", "bayes-minutes-at-k10"),
    ("The defaults take half a minute (nutpie compiles the model with JAX).",
     "nutpie-is-default"),
])
def test_each_rule_catches_the_phrase_it_was_written_for(text: str, rule: str) -> None:
    assert [f for f in stale_phrases({"page": text}) if f"[{rule}," in f], rule


def test_rules_leave_the_legitimate_uses_alone() -> None:
    ok = ('With `reg="none"` vector scaling is the original unpenalised fit; '
          "matrix scaling likewise.\n\n"
          "`eps = 2.22e-16` everywhere (`bayescal.EPS`).\n\n"
          "nutpie's JAX build (then the default) took 28 s.")
    assert stale_phrases({"page": ok}) == []


def test_notebook_text_above_a_default_fit_does_not_call_it_odir() -> None:
    # notebook 01 said "ODIR penalty, chosen by internal cross-validation" right
    # above DirichletCalibrator(), whose default is the structured penalty
    assert _sig("DirichletCalibrator", "reg") == "structured"
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = _notebook_cells(path)
        for (kind, text), (next_kind, code) in pairwise(cells):
            above = _paragraphs(text)[-1] if kind == "markdown" and text.strip() else ""
            if (next_kind == "code" and re.search(r"\bODIR\b", above)
                    and "DirichletCalibrator()" in code and "default" not in above):
                found.append(f"{path.name}: {above[:200]}")
    assert not found, "\n".join(found)
