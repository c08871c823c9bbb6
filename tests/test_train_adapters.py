"""Adapters import without their trainer and say what to install (main environment: no verl, no slime).

The adapters themselves are tested against the trainers' code in test_train_verl.py (real verl 0.9.1, in its
own environment) and test_train_slime.py (a stand-in of slime at a named commit).
"""

from __future__ import annotations

import importlib
import sys

import pytest

from shopsimrl.train import verl as verl_adapter


@pytest.mark.parametrize("module, attribute, hint", [
    ("shopsimrl.train.verl", "ShopAgentLoop", r"verl is not installed: `pip install 'shopsimrl\[verl\]'`"),
])
def test_adapters_import_without_trainer_and_say_what_to_install(monkeypatch, module, attribute, hint) -> None:
    monkeypatch.setitem(sys.modules, "verl", None)  # make `import verl` fail even if it were installed
    mod = importlib.import_module(module)
    mod._CACHE.clear()
    with pytest.raises(verl_adapter.VerlAdapterError, match=hint):
        getattr(mod, attribute)
