"""Error classes that cross a boundary (raised to a caller of the Python API, the CLI or a trainer) live in
``shopsimrl.errors``, one class per boundary with a ``code`` for the detail (issue 40 item 3); the few internal
ones left next to their code say why. Found by reading every class of
the package with ``ast``, so a new error class elsewhere fails until it is placed or listed."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from shopsimrl import errors

SRC = Path(__file__).resolve().parents[1] / "src" / "shopsimrl"

STAYING = {
    "_Reject": "agent/validation.py: the validator's internal early exit, turned into a protocol error there",
    "_Abort": "env/_result_rules.py: the checker's internal early exit",
    "EnvCheckError": "env/checker.py: check_env's verdict (an AssertionError) on a foreign implementation",
    "PostingsUnavailable": "search/_postings.py: the search backend falls back to SQLite; never reaches a caller",
}


def _error_classes_outside() -> dict[str, str]:
    known = {name for name, value in vars(errors).items() if inspect.isclass(value) and issubclass(value, Exception)}
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
            if bases & (known | set(STAYING) | {"Exception", "ValueError", "RuntimeError"}):
                found[node.name] = str(path.relative_to(SRC))
    return found


def test_every_error_class_outside_the_errors_module_says_why_it_stays():
    outside = _error_classes_outside()
    assert set(outside) == set(STAYING), {name: outside.get(name) for name in set(outside) ^ set(STAYING)}
    for name, where in outside.items():
        assert STAYING[name].startswith(where), (name, where)


def test_adapter_errors_are_one_class():
    assert [name for name in vars(errors) if name.endswith("AdapterError")] == ["AdapterError"]
    from shopsimrl.train import row_codec, slime, trl, verl

    assert trl.AdapterError is verl.AdapterError is slime.AdapterError is row_codec.AdapterError is errors.AdapterError


def test_errors_are_a_dozen_boundary_classes_whose_codes_name_one_class():
    classes = [v for v in vars(errors).values() if inspect.isclass(v) and issubclass(v, errors.ShopSimError)]
    assert set(classes) == {errors.ShopSimError, *errors.BOUNDARIES} and len(errors.BOUNDARIES) == 12
    seen: dict[str, type] = {}
    for kind in classes:
        assert kind.default_code in kind.codes, kind
        for code in kind.codes:
            assert seen.setdefault(code, kind) is kind, (code, kind, seen[code])
    assert seen == errors.KIND_OF_CODE


def test_builtin_bases_that_callers_catch_are_kept():
    assert issubclass(errors.RequestError, ValueError) and issubclass(errors.DataError, ValueError)
    assert issubclass(errors.EpisodeStateError, RuntimeError)
    for kind in (errors.ShopperCallError, errors.ModelCallError, errors.PolicyError, errors.AdapterError,
                 errors.RolloutError, errors.AdmissionError, errors.LeaseError, errors.ServiceError, errors.ConfigError):
        assert not issubclass(kind, ValueError | RuntimeError), kind


def _literal_codes() -> list[tuple[str, str, str]]:
    """(file:line, class, code) of every ``Boundary(..., code="...")`` written in the package."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in vars(errors):
                for keyword in node.keywords:
                    if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                        found.append((f"{path.relative_to(SRC)}:{node.lineno}", node.func.id, keyword.value.value))
    return found


def test_every_code_written_in_the_package_belongs_to_its_class():
    found = _literal_codes()
    assert len(found) > 200, len(found)
    wrong = [(where, name, code) for where, name, code in found if code not in getattr(errors, name).codes]
    assert wrong == []


def test_escaped_names_the_boundary_and_the_code():
    assert errors.escaped(errors.unknown_task(7)) == ("RequestError", "unknown_task")
    assert errors.escaped(errors.ShopSimError("x")) == ("ShopSimError", "error")
    assert errors.escaped(KeyError("x")) == ("KeyError", None)
    assert str(errors.unknown_task(7)) == "unknown or inactive task_id 7" and errors.unknown_task(7).task_id == 7
    try:
        errors.DataError("x", code="unknown_task")
    except TypeError as exc:
        assert "DataError has no error code 'unknown_task'" in str(exc)
    else:
        raise AssertionError("a code of another class must be refused")
