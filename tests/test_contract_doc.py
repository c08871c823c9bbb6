"""Code comments cite docs/contract.md by anchor, every cited anchor exists, and the document's own links
resolve (issue 12 item 6)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "contract.md"
SRC = ROOT / "src" / "shopsimrl"
_ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')
_LINK = re.compile(r"\]\(#([a-z0-9-]+)\)")


def _doc() -> str:
    return CONTRACT.read_text("utf-8")


_CITED_ANCHOR = re.compile(r"docs/contract\.md#([a-z0-9-]+)((?:, #[a-z0-9-]+)*)")
SCANNED = (SRC, ROOT / "tests", ROOT / "benchmarks", ROOT / "examples")


def _sources() -> list[Path]:
    return [path for folder in SCANNED for path in folder.rglob("*")
            if path.suffix in (".py", ".js", ".html") and path.is_file() and path != Path(__file__)]


def test_code_cites_the_contract_not_the_research_notes():
    """Comments cite docs/contract.md anchors; no `§` section of a document outside the repository is left."""
    left = [f"{path.relative_to(ROOT)}:{n}" for path in _sources()
            for n, line in enumerate(path.read_text("utf-8").splitlines(), 1) if "§" in line]
    assert not left, f"`§` citations left (cite docs/contract.md#anchor instead): {left[:10]}"


def test_every_cited_anchor_exists():
    anchors = set(_ANCHOR.findall(_doc()))
    cited: set[str] = set()
    for path in _sources():
        for first, more in _CITED_ANCHOR.findall(path.read_text("utf-8")):
            cited.add(first)
            cited.update(re.findall(r"#([a-z0-9-]+)", more))
    assert len(cited) > 40  # the scan works: the code cites dozens of sections
    missing = sorted(cited - anchors)
    assert not missing, f"docs/contract.md defines no anchor {missing}"


def test_every_link_points_at_a_defined_anchor():
    doc = _doc()
    anchors = _ANCHOR.findall(doc)
    assert len(anchors) == len(set(anchors)), "an anchor is defined twice"
    dangling = sorted(set(_LINK.findall(doc)) - set(anchors))
    assert not dangling, f"links to undefined anchors: {dangling}"

