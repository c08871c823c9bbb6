"""``shopsimrl serve-openenv`` without the ``openenv`` extra: a clear error naming the extra, not a traceback."""

from __future__ import annotations

import importlib.util

import pytest

from shopsimrl.cli import main


def test_serve_openenv_names_the_missing_extra(prepared_dir, capsys):
    if importlib.util.find_spec("openenv") is not None:
        pytest.skip("openenv is installed here; the server itself is tested in .venv-openenv")
    assert main(["serve-openenv", "--data", str(prepared_dir), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "shopsimrl[openenv]" in err and "Traceback" not in err


def test_serve_openenv_checks_the_data_directory_first(tmp_path, capsys):
    assert main(["serve-openenv", "--data", str(tmp_path / "missing")]) == 2
    assert "shopsimrl: error:" in capsys.readouterr().err
