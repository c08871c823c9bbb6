"""A tiny character-level Hugging Face tokenizer with a tools-aware chat template, built locally (no download).

For CPU smoke runs of the trainer adapters with a randomly initialised model: the vocabulary is every
character of the texts given (catalog text, prompt, tool schemas), plus ChatML special tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if loop.first and m.role == 'system' %}<|im_start|>system\n{{ m.content }}"
    "{% if tools %}\n\n# Tools\n{% for t in tools %}\n{{ t | tojson }}{% endfor %}{% endif %}<|im_end|>\n"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments if c.function.arguments is string else c.function.arguments | tojson }}}"
    "</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>{{ m.content }}</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|unk|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer(texts: Iterable[str]) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = sorted({c for text in texts for c in text} | set("<>{}[]\":,_/= \n0123456789abcdefghijklmnopqrstuvwxyz"))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<|unk|>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<|unk|>", pad_token="<|pad|>",
                                        eos_token="<|im_end|>", bos_token=None,
                                        additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
