"""``shopsim-env``: ShopSimRL for verifiers (``vf-eval shopsim-env``; see the project README)."""

from .taskset import ShopSimEnv, ShopSimHarness, ShopSimTaskset
from .toolset import ShopSimState, ShopSimToolset

__all__ = ["ShopSimEnv", "ShopSimHarness", "ShopSimState", "ShopSimTaskset", "ShopSimToolset"]
