"""The package's import graph has no cycle: not at import time (module-level imports), not through imports
inside functions (which run later, but a cycle hidden by one is still two modules that need each other), not
through ``if TYPE_CHECKING:`` imports (a type that must come from above is a layer pointing up), and not between
subpackages (``env`` → ``dialogue`` → ``env`` is a knot even when no two modules form a circle).

A cycle makes the import order matter and a partly initialised module visible; the layers are meant to
point only down. Parsed with ``ast``, so nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for file in sorted((SRC / "shopsimrl").rglob("*.py")):
        parts = list(file.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (file, package)
    return found


def _all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement: inside functions and under ``if TYPE_CHECKING:`` too."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            found.extend(sub for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
    return found


def import_graph(*, inside_functions: bool = False) -> dict[str, set[str]]:
    """module → the package modules its import runs (an ancestor package of the importer is already running);
    ``inside_functions``: also the modules its functions import when they run and its ``TYPE_CHECKING`` imports."""
    reader = _all_imports if inside_functions else _top_level_imports
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, (file, package) in modules.items():
        here = name.split(".") if package else name.split(".")[:-1]
        targets: set[str] = set()
        for node in reader(ast.parse(file.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = here[: len(here) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            submodules = {f"{source}.{alias.name}" for alias in node.names} & modules.keys()
            targets |= submodules
            if len(submodules) < len(node.names):
                targets.add(source)
        edges: set[str] = set()
        for target in targets:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
                dependency = ".".join(parts[:end])
                if dependency in modules and dependency != name and not name.startswith(dependency + "."):
                    edges.add(dependency)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in order:
            continue
        work = [(root, iter(sorted(graph[root])))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_import_graph_has_no_cycle():
    graph = import_graph()
    assert len(graph) > 100 and graph["shopsimrl.search._index"] >= {"shopsimrl.search._pool", "shopsimrl.errors"}
    assert cycles(graph) == []


def subpackage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded by subpackage: ``shopsimrl.env.tools._tool`` counts as ``shopsimrl.env``; a top-level
    module (``shopsimrl.contract``) is its own node."""
    def node(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(node(module), set()).update(node(target) for target in targets)
    for name, targets in folded.items():
        targets.discard(name)
    return folded


def test_imports_inside_functions_and_for_type_checking_hide_no_cycle():
    """cli ↔ eval.commands, search._postings ↔ _postings_build, server app ↔ guard ↔ http_errors, the CPU recipe's
    cpu_demo ↔ cpu_demo_sft/grpo (through ``RecipeConfig`` under TYPE_CHECKING) and env ↔ dialogue ↔ generate (the
    environment built its own shoppers) were hidden by imports inside functions or for type checking."""
    graph = import_graph(inside_functions=True)
    assert "shopsimrl.cli" not in graph["shopsimrl.eval.commands"]
    assert "shopsimrl.server.app" not in graph["shopsimrl.server.guard"]
    assert "shopsimrl.train.cpu_demo" not in graph["shopsimrl.train.cpu_demo_sft"]
    assert cycles(graph) == []


def test_the_subpackages_form_no_cycle():
    """The subpackages are layers: no two of them import each other, directly or around a circle (the knot of
    agent, dialogue, env, generate and server, and testing ↔ train, are gone: the shoppers are injected into the
    environment, the dialogue play loop lives in agent, the BPE builder in train)."""
    folded = subpackage_graph(import_graph(inside_functions=True))
    assert {"shopsimrl.env", "shopsimrl.dialogue", "shopsimrl.agent", "shopsimrl.contract"} <= folded.keys()
    assert "shopsimrl.dialogue" not in folded["shopsimrl.env"] and "shopsimrl.agent" not in folded["shopsimrl.dialogue"]
    assert cycles(folded) == []
    assert cycles(subpackage_graph(import_graph())) == []
