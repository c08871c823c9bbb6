"""Error classes that cross a boundary (raised to a caller of the Python API, the CLI or a trainer) live in
``shopsimrl.errors`` (issue 23 item 6); the few left next to their code say why. Found by reading every class of
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
    "DataError": "generate/vocabulary.py: a broken vocabulary file shipped in the package (a build error)",
    "ConfigError": "agent/policy_server.py: a --faults value of the policy server's own test switch",
    "PolicyError": "agent/shopper_backend.py: the scripted shopper's own request check",
    "RolloutError": "train/slime.py: slime's abort flag inside the adapter, recorded as an aborted episode",
    "RequestError": "openenv/environment.py: an RequestError of the OpenEnv wrapper (issue 28 reworks it)",
    "RequestError": "openenv/environment.py: as RequestError",
    # the HTTP guard's admission refusals (an allowed CORS preflight is a response: guard.Preflight)
    **{name: "server/guard.py: an admission refusal" for name in (
        "AdmissionError", "AdmissionError", "AdmissionError", "AdmissionError", "AdmissionError",
        "AdmissionError", "AdmissionError", "AdmissionError")},
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
