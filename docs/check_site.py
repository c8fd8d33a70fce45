"""Check the built documentation as a reader would see it, offline.

Usage (from the repository root; ``make docs-check`` runs it)::

    python docs/check_site.py [--html docs/_build/html] [--report REPORT.html]
                              [--screenshots docs/_build/screenshots]

Checks of the HTML files, which need nothing but Python (the test suite runs
them on every build, :func:`check_html`):

* no page loads a script, style sheet, font or image from another host;
* every page with math loads MathJax from the site itself, and the file exists;
* every executed page (notebook, gallery example) shows at least the figures its code draws;
* no page shows TeX that MathJax will not typeset: a ``$...$`` formula or a
  TeX command (``\\mathrm``, ``\\frac``, ...) outside the math containers,
  code and scripts (:func:`raw_tex`; for instance a wrapped ``$...$`` whose
  next line starts with ``+ `` and became a Markdown list item);
* every public name (``bayescal.__all__``, ``bayescal.plots.__all__``,
  ``bayescal.bayes.__all__``) has an API page, and class pages list the
  methods inherited from scikit-learn.

With headless Chromium and chromedriver (Debian packages ``chromium`` and
``chromium-driver``), it also loads every page (and the demo report, with
``--report``) in a browser with no network access and checks what it shows:
every formula typeset by MathJax (no raw TeX, no TeX errors), no code block,
heading or signature wider than its box, no page wider than the 1280-pixel
window, every image loaded. A 1280 x 2000 screenshot of each page is written
to ``--screenshots`` for a person to look at. Exit status 1 and one line per
problem when a check fails; 2 when the site is not built or the browser is
missing.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Figures each executed page draws (at least): page -> number of images in cell outputs.
EXPECTED_FIGURES = {
    "index": 1,
    "notebooks/01_the_theorem": 2,
    "notebooks/02_uncertainty_on_weights": 4,
    "notebooks/03_generative_vs_discriminative": 4,
    # the runnable examples of the gallery (docs/examples/*.md)
    "examples/calibrate_a_classifier": 0,
    "examples/choosing_a_method": 0,
    "examples/reliability_diagrams": 3,
    "examples/bayesian_uncertainty": 1,
    "examples/three_forms": 1,
    "examples/score_files": 0,
}
#: Methods every calibrator page must show (inherited from scikit-learn's BaseEstimator).
INHERITED = ("get_params", "set_params")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
)


class _Page(HTMLParser):
    """Resources a page loads, its math and its cell-output images."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.resources: list[str] = []
        self.scripts: list[str] = []
        self.math = 0
        self.output_images = 0
        self.api_entries: list[str] = []
        self._output_depth = 0
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag not in ("br", "img", "link", "meta", "input", "hr", "source"):
            self._depth += 1
            if self._output_depth == 0 and ("cell_output" in classes or "output" in classes):
                self._output_depth = self._depth
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
            self.resources.append(a["src"])
        elif tag == "link" and a.get("rel", "") in ("stylesheet", "preload", "icon"):
            self.resources.append(a.get("href", ""))
        elif tag in ("img", "source", "iframe") and a.get("src"):
            self.resources.append(a["src"])
            if tag == "img" and self._output_depth:
                self.output_images += 1
        if "math" in classes:
            self.math += 1
        if tag == "dt" and a.get("id"):
            self.api_entries.append(a["id"])

    def handle_endtag(self, tag: str) -> None:
        if tag in ("br", "img", "link", "meta", "input", "hr", "source"):
            return
        if self._output_depth and self._depth == self._output_depth:
            self._output_depth = 0
        self._depth -= 1


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


#: Elements whose text is not prose: MathJax's containers (``span.math``,
#: ``div.math``: the ``\\(...\\)`` and ``\\[...\\]`` of Sphinx's mathjax
#: extension), code, and what the browser does not show as text.
_NOT_PROSE_TAGS = {"code", "pre", "kbd", "samp", "script", "style", "head", "textarea", "svg"}
_VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
              "source", "track", "wbr"}
#: A ``$...$`` formula (no space inside either dollar, as in Markdown's dollarmath) or a
#: TeX command or math delimiter, in prose.
_RAW_TEX = re.compile(
    r"\$(?=[^\s$])[^$\x00]{0,300}?(?<=[^\s$\\])\$"
    r"|\\(?:mathrm|mathbf|mathcal|mathbb|operatorname|text|frac|tfrac|dfrac|sum|prod|int"
    r"|ln|log|exp|sqrt|cdot|times|le|ge|ne|approx|sim|mid|in|infty|partial|nabla|left|right"
    r"|Big|big|alpha|beta|gamma|Gamma|delta|lambda|mu|pi|sigma|tau|theta|hat|bar|tilde"
    r"|begin|end)(?![A-Za-z])|\\[(\[]"
)


class _Prose(HTMLParser):
    """The text a page shows outside math containers, code and scripts.

    Runs of text are joined; a skipped element leaves ``\\x00`` in its place,
    so a formula is never matched across a math container or a code span.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._open: list[tuple[str, bool]] = []  # (tag, starts a skipped region?)
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_TAGS:
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = tag in _NOT_PROSE_TAGS or "math" in classes
        self._open.append((tag, skip))
        if skip:
            if self._skipping == 0:
                self.parts.append("\x00")
            self._skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if not any(t == tag for t, _ in self._open):
            return  # a void element, or a stray end tag
        while True:  # also closes elements left open inside this one (<li>, <p>)
            t, skip = self._open.pop()
            self._skipping -= skip
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._skipping == 0:
            self.parts.append(data)


def raw_tex(page: str) -> list[str]:
    """Snippets of TeX in the prose of the HTML ``page``: each formula or command
    that MathJax leaves as it is, with 40 characters either side."""
    parser = _Prose()
    parser.feed(page)
    parser.close()
    text = "".join(parser.parts)
    windows: list[list[int]] = []
    for match in _RAW_TEX.finditer(text):
        start, end = max(match.start() - 40, 0), match.end() + 40
        if windows and start <= windows[-1][1]:
            windows[-1][1] = end  # one snippet for the TeX of one formula
        else:
            windows.append([start, end])
    return [" ".join(text[a:b].replace("\x00", " ").split()) for a, b in windows]


def check_tex(html: Path) -> list[str]:
    """Problems: TeX shown as text on a page (see :func:`raw_tex`)."""
    return [f"{path.relative_to(html).with_suffix('').as_posix()}: TeX not typeset: {s!r}"
            for path in pages(html) for s in raw_tex(path.read_text(encoding="utf-8"))]


def pages(html: Path) -> list[Path]:
    """The site's own pages (not the search page, the index or the source listings)."""
    skip = {"search.html", "genindex.html", "py-modindex.html"}
    return sorted(p for p in html.rglob("*.html")
                  if p.name not in skip and "_sources" not in p.parts
                  and "_modules" not in p.parts and "_static" not in p.parts)


def _external(url: str) -> bool:
    return bool(re.match(r"^(https?:)?//", url))


def public_names() -> dict[str, object]:
    """Every documented-by-contract name, as ``"module.name" -> object``."""
    names = {}
    for module in ("bayescal", "bayescal.plots", "bayescal.bayes"):
        mod = importlib.import_module(module)
        for name in mod.__all__:
            if not name.startswith("__"):
                names[f"{module}.{name}"] = getattr(mod, name)
    return names


def _resolve(dotted: str) -> object | None:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def check_api(html: Path) -> list[str]:
    """Problems with the API pages: a public name without a page, a class without
    its inherited methods."""
    generated = html / "api" / "generated"
    documented: dict[int, Path] = {}
    for page in generated.glob("*.html"):
        obj = _resolve(page.stem)
        if obj is not None:
            documented.setdefault(id(obj), page)
    problems = []
    for name, obj in public_names().items():
        if isinstance(obj, (int, float, str)) and name.rsplit(".", 1)[-1].isupper():
            page = generated / f"{name}.html"  # constants: documented under their own name
            if not page.is_file():
                problems.append(f"API: no page for the constant {name}")
            continue
        page = documented.get(id(obj))
        if page is None:
            problems.append(f"API: {name} has no page in {generated.relative_to(html)}")
            continue
        if isinstance(obj, type) and hasattr(obj, "get_params"):
            ids = set(parse(page).api_entries)
            missing = [m for m in INHERITED if not any(i.endswith(f".{m}") for i in ids)]
            if missing:
                problems.append(f"API: {page.name} does not show the inherited {missing}")
    return problems


def check_html(html: Path) -> list[str]:
    """Every offline check of the built HTML; an empty list when all pass."""
    problems: list[str] = []
    mathjax = html / "_static" / "mathjax" / "tex-chtml.js"
    for path in pages(html):
        rel = path.relative_to(html).with_suffix("").as_posix()
        page = parse(path)
        for url in page.resources:
            if _external(url):
                problems.append(f"{rel}: loads {url} from another host")
        if page.math:
            local = [s.split("?")[0] for s in page.scripts
                     if s.split("?")[0].endswith("mathjax/tex-chtml.js") and not _external(s)]
            if not local:
                problems.append(f"{rel}: has math but loads no local MathJax")
            elif not (path.parent / local[0]).resolve().is_file():
                problems.append(f"{rel}: MathJax script {local[0]} is missing")
        wanted = EXPECTED_FIGURES.get(rel)
        if wanted is not None and page.output_images < wanted:
            problems.append(f"{rel}: {page.output_images} figures in cell outputs, "
                            f"expected {wanted}")
    for rel in EXPECTED_FIGURES:
        if not (html / f"{rel}.html").is_file():
            problems.append(f"{rel}: page missing")
    if not mathjax.is_file():
        problems.append(f"{mathjax.relative_to(html)} missing")
    return problems + check_tex(html) + check_api(html)


# ---------------------------------------------------------------------------
# in the browser
# ---------------------------------------------------------------------------
#: Run in each loaded page once MathJax is done: what a reader would see.
_INSPECT = r"""
const done = arguments[arguments.length - 1];
const inspect = () => {
  const math = [...document.querySelectorAll('.math')];
  const boxes = [...document.querySelectorAll('pre, div.highlight, article h1, article h2, '
                                             + 'dl.py > dt')];
  done({
    math: math.length,
    typeset: document.querySelectorAll('mjx-container').length,
    raw_math: math.filter(e => !e.querySelector('mjx-container')).length,
    tex_errors: document.querySelectorAll('mjx-merror').length,
    overflowing: boxes.filter(e => e.scrollWidth > e.clientWidth + 1)
                      .map(e => e.textContent.trim().split('\n')[0].slice(0, 60)),
    page_overflow: document.documentElement.scrollWidth > window.innerWidth + 1,
    broken_images: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                      .map(i => i.getAttribute('src').slice(0, 80)),
  });
};
if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
  MathJax.startup.promise.then(inspect, inspect);
} else {
  setTimeout(inspect, 300);
}
"""


def chromium() -> tuple[str, str] | None:
    """Paths of Chromium and its WebDriver (chromedriver), or None."""
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(n)), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


class Browser:
    """Headless Chromium driven through chromedriver's W3C WebDriver HTTP interface.

    Only the standard library is used; the browser runs with no network
    access beyond ``file://`` pages, in a fresh profile.
    """

    def __init__(self, browser: str, driver: str, profile: Path, size: str = "1280,2000"):
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.proc = subprocess.Popen([driver, f"--port={self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                self._call("GET", "/status")
                break
            except OSError:
                import time

                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": browser, "args": [
                *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size}"]},
        }}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: dict | None = None):
        import json
        import urllib.request

        req = urllib.request.Request(self.base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())["value"]

    def visit(self, page: Path) -> dict:
        """Load ``page``, wait for MathJax, and return what :data:`_INSPECT` sees."""
        self._call("POST", f"/session/{self.session}/url", {"url": page.as_uri()})
        self._call("POST", f"/session/{self.session}/timeouts", {"script": 30000})
        return self._call("POST", f"/session/{self.session}/execute/async",
                          {"script": _INSPECT, "args": []})

    def screenshot(self, out: Path) -> None:
        import base64

        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(self._call("GET",
                                                    f"/session/{self.session}/screenshot")))

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def check_browser(html: Path, report: Path | None, shots: Path | None,
                  tools: tuple[str, str]) -> list[str]:
    """Every page (and the report) as the browser shows it; a screenshot of each."""
    problems = []
    targets = [(p.relative_to(html).with_suffix("").as_posix(), p) for p in pages(html)]
    if report is not None:
        targets.append(("demo-report", report))
    with tempfile.TemporaryDirectory(prefix="bayescal-chromium-") as tmp:
        browser = Browser(*tools, profile=Path(tmp))
        try:
            for rel, path in targets:
                seen = browser.visit(path)
                if seen["raw_math"]:
                    problems.append(f"{rel}: {seen['raw_math']} of {seen['math']} formulas "
                                    "not typeset (raw TeX on the page)")
                if seen["tex_errors"]:
                    problems.append(f"{rel}: {seen['tex_errors']} formulas with TeX errors")
                for first_line in seen["overflowing"]:
                    problems.append(f"{rel}: text wider than its box (cut off): "
                                    f"{first_line!r}")
                if seen["page_overflow"]:
                    problems.append(f"{rel}: the page is wider than the window")
                for src in seen["broken_images"]:
                    problems.append(f"{rel}: image not shown: {src}")
                if shots is not None:
                    browser.screenshot(shots / f"{rel.replace('/', '__')}.png")
        finally:
            browser.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "docs" / "_build" / "html")
    parser.add_argument("--report", type=Path, help="a report.html to screenshot as well")
    parser.add_argument("--screenshots", type=Path,
                        default=ROOT / "docs" / "_build" / "screenshots")
    parser.add_argument("--no-browser", action="store_true", help="only the HTML checks")
    args = parser.parse_args(argv)
    args.html = args.html.resolve()
    if args.report is not None:
        args.report = args.report.resolve()
    if not (args.html / "index.html").is_file():
        print(f"no built documentation in {args.html}; run make docs", file=sys.stderr)
        return 2
    problems = check_html(args.html)
    if not args.no_browser:
        tools = chromium()
        if tools is None:
            print("chromium and chromedriver not found (apt-get install chromium "
                  "chromium-driver); browser checks and screenshots not run", file=sys.stderr)
            return 2
        problems += check_browser(args.html, args.report, args.screenshots, tools)
        print(f"screenshots: {args.screenshots}")
    for line in problems:
        print(line)
    print(f"{len(pages(args.html))} pages checked: "
          f"{'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
