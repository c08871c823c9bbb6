"""A byte-level BPE tokenizer trained locally on given texts (no download): the CPU recipe's tokenizer
(``train/local_lm.py``) and the template tests' (``shopsimrl.testing``), so it lives in ``train`` and the test
helpers import it from here (``testing`` builds on ``train``, never the other way)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Qwen2-style pre-tokenization pattern (public format fact: contractions, letters, single digits, punctuation runs,
# newlines, spaces), then byte-level mapping, so BPE merges can span what a chat template joins together.
QWEN_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# The special tokens of every template family in the test matrix (one shared vocabulary).
FAMILY_SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>", "<think>", "</think>",
    "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|call|>", "<|return|>", "<|constrain|>",
    "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<arg_key>", "</arg_key>",
    "<arg_value>", "</arg_value>",
]


def build_bpe_tokenizer(texts: Iterable[str], *, vocab_size: int = 3000, eos_token: str = "<|im_end|>",
                        chat_template: str | None = None) -> Any:
    """A byte-level BPE trained here on ``texts`` with a Qwen-style pre-tokenizer (no download).

    Merges really cross what the template concatenates (``"\\n\\n"``, ``'"}'``, spaces before words), so a
    re-encoded conversation can differ from the sampled tokens: the retokenization-drift case.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=FAMILY_SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos_token, pad_token="<|endoftext|>",
                                        bos_token=None)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer
