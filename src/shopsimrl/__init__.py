"""ShopSimRL: a deterministic local simulator for LLM shopping agents."""

__version__ = "0.1.0"
