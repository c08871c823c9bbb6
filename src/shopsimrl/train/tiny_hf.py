"""A re-export of :mod:`shopsimrl.testing.tiny_hf` (where the tiny local tokenizer lives), kept only so that
modules written against the old path (the CPU recipe's ``train/local_lm.py``) keep importing; new code imports
``shopsimrl.testing.tiny_hf``."""

from ..testing.tiny_hf import CHAT_TEMPLATE, build_bpe_tokenizer, build_tokenizer

__all__ = ["CHAT_TEMPLATE", "build_bpe_tokenizer", "build_tokenizer"]
