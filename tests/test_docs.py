"""The code in README.md and docs/*.md runs, and prints what the page says it prints.

Each page's ```python blocks run in order in one namespace (a page is one session), in a
temporary directory. A ```text block right after a python block is that block's expected
standard output.
"""

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n(?:\s*?\n)*", re.S | re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def blocks(page):
    """[(code, expected output or None, line)] for the page's python blocks."""
    text = page.read_text()
    found = list(FENCE.finditer(text))
    out = []
    for i, m in enumerate(found):
        if m.group(1) != "python":
            continue
        nxt = found[i + 1] if i + 1 < len(found) else None
        expected = nxt.group(2) if nxt and nxt.group(1) == "text" and nxt.start() == m.end() \
            else None
        out.append((m.group(2), expected, text.count("\n", 0, m.start()) + 1))
    return out


def normalize(text):
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_code_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = blocks(page)
    assert found, f"{page.name} has no python code"
    namespace = {"__name__": "__docs__"}
    for code, expected, line in found:
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        if expected is not None:
            assert normalize(stdout.getvalue()) == normalize(expected), \
                f"{page.name}:{line} printed something else than the page shows"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_every_subsystem_has_a_guide():
    names = {p.name for p in PAGES}
    for guide in ["tensors-autograd.md", "nn.md", "optim.md", "data.md", "serialization.md"]:
        assert guide in names


def test_output_blocks_pair_with_the_code_above_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nprint(1)\n```\n\n```text\n1\n```\n\nprose\n\n"
                    "```python\nx = 2\n```\nprose\n```text\nnot output\n```\n")
    (first, out1, line1), (second, out2, line2) = blocks(page)
    assert (first, out1, line1) == ("print(1)\n", "1\n", 3)
    assert (second, out2, line2) == ("x = 2\n", None, 13)
