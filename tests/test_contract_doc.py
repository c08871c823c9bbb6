"""docs/contract.md resolves every `§` section cited in the code, and its links point at anchors it defines
(issue 12 item 6)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "contract.md"
SRC = ROOT / "src" / "shopsimrl"
RUNTIME_PACKAGES = ("agent", "eval", "train")  # a bare § there means runtime_spec, elsewhere env_spec

_CITE = re.compile(r"(?:(env_spec|runtime_spec)[ ,]*)?§ ?(\d+(?:\.\d+)?)(?:[–-](\d+(?:\.\d+)?))?")
_ANCHOR = re.compile(r'<a id="([a-z0-9-]+)"></a>')
_LINK = re.compile(r"\]\(#([a-z0-9-]+)\)")


def _doc() -> str:
    return CONTRACT.read_text("utf-8")


def _table() -> dict[tuple[str, str], list[str]]:
    """(spec, section) → the anchors its row links to."""
    rows: dict[tuple[str, str], list[str]] = {}
    for line in _doc().splitlines():
        match = re.match(r"\| (env_spec|runtime_spec) (§[^|]+)\| (.+) \|$", line)
        if match:
            for section in re.findall(r"§(\d+(?:\.\d+)?)", match.group(2)):
                rows[(match.group(1), section)] = _LINK.findall(match.group(3))
    return rows


def _cited() -> set[tuple[str, str]]:
    cited = set()
    for path in SRC.rglob("*"):
        if path.suffix not in (".py", ".js", ".html") or not path.is_file():
            continue
        default = "runtime_spec" if path.relative_to(SRC).parts[0] in RUNTIME_PACKAGES else "env_spec"
        for spec, first, last in _CITE.findall(path.read_text("utf-8")):
            spec = spec or default
            cited.add((spec, first))
            if last:  # a range such as §2.2–2.3 cites both ends
                cited.add((spec, last))
    return cited


def test_every_cited_section_has_a_row():
    table, cited = _table(), _cited()
    assert len(cited) > 40  # the scan works: the code cites dozens of sections today
    missing = sorted(key for key in cited if key not in table)
    assert not missing, f"docs/contract.md has no row for {missing}"


def test_every_link_points_at_a_defined_anchor():
    doc = _doc()
    anchors = _ANCHOR.findall(doc)
    assert len(anchors) == len(set(anchors)), "an anchor is defined twice"
    dangling = sorted(set(_LINK.findall(doc)) - set(anchors))
    assert not dangling, f"links to undefined anchors: {dangling}"
    assert all(rows for rows in _table().values())

