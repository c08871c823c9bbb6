"""Constrained decoding of one tool call: what an OpenAI-compatible server does for ``tool_choice="required"``
(vLLM's structured outputs from the request's tool schemas), for the local sampler of the CPU recipe.

The sampled text is always ``<tool_call>\\n{"name": N, "arguments": {"k": "v", ...}}\\n</tool_call>`` followed
by the end-of-turn token (the Hermes form the Qwen2.5 template renders), for one of the turn's tools, with its
properties in schema order. A string property with an ``enum`` is exactly one of its values (a click is a choice
among the page's values, not a copy of a 12-digit id from thousands of tokens back); a free string is any JSON
string without escapes or control characters. Only the *support* is constrained: among the allowed tokens the
model's own distribution decides, and the log-probs reported are the unconstrained ones (vLLM's raw log-probs),
so a trainer's importance ratio compares like with like.

The grammar is a byte trie (a node may loop on the bytes of a free string); the allowed tokens of a node are
found by walking the tokenizer's vocabulary trie alongside it, cached per node and per tool list.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PolicyError

OPEN, CLOSE = "<tool_call>\n", "\n</tool_call>"
QUOTE, BACKSLASH = 0x22, 0x5C
#: Bytes a free JSON string may hold unescaped (no control characters, no quote, no backslash).
FREE_BYTES = frozenset(b for b in range(0x20, 0x100) if b not in (QUOTE, BACKSLASH))
#: Bytes a free string may start with: a visible ASCII character, or the lead byte of a character that is never
#: whitespace (U+00C0 onwards, leaving out the blocks U+0800..U+3FFF that hold U+1680, U+2000..U+205F and U+3000),
#: so the string is never blank (the validator refuses blank arguments).
FIRST_BYTES = frozenset(b for b in [*range(0x21, 0x7F), *range(0xC3, 0xE0), *range(0xE4, 0xF5)]
                        if b not in (QUOTE, BACKSLASH))


@dataclass(eq=False)
class Node:
    """A grammar state: literal byte edges, an optional loop over :data:`FREE_BYTES` (inside a free string, at
    most ``limit`` bytes long), and whether the call is complete (only the end-of-turn token may follow)."""

    edges: dict[int, Node] = field(default_factory=dict)
    free: bool = False
    limit: int | None = None
    final: bool = False

    def step(self, byte: int) -> Node | None:
        nxt = self.edges.get(byte)
        if nxt is not None:
            return nxt
        return self if self.free and byte in FREE_BYTES else None


@dataclass(frozen=True)
class _Free:
    """A free string's contents in a call skeleton (``maxLength`` characters at most: bounded in bytes)."""

    limit: int | None


def _skeletons(tool: Mapping[str, Any]) -> list[list[Any]]:
    """Every form of one tool's call, as lists of text pieces and :class:`_Free` markers."""
    function = tool.get("function") or tool
    name = function.get("name")
    params = function.get("parameters") or {}
    props: Mapping[str, Any] = params.get("properties") or {}
    if not isinstance(name, str):
        raise PolicyError("a tool without a name", code="grammar")
    forms: list[list[Any]] = [[OPEN + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": {']]
    for i, (key, schema) in enumerate(props.items()):
        if not isinstance(schema, Mapping) or schema.get("type") != "string":
            raise PolicyError(f"tool {name!r}: property {key!r} is not a string", code="grammar")
        head = (", " if i else "") + json.dumps(key, ensure_ascii=False) + ": "
        enum = schema.get("enum")
        if enum is not None:  # blank values are left out: the validator refuses them
            values = [json.dumps(v, ensure_ascii=False) for v in enum if isinstance(v, str) and v.strip()]
            forms = [[*form, head + value] for form in forms for value in values]
        else:
            limit = schema.get("maxLength")
            forms = [[*form, head + '"', _Free(limit if isinstance(limit, int) else None), '"'] for form in forms]
    return [[*form, "}}" + CLOSE] for form in forms]


def build_grammar(tools: Sequence[Mapping[str, Any]]) -> Node:
    """The trie of every call of ``tools`` (a tool whose enum has no valid value has no call)."""
    root = Node()
    for tool in tools:
        for form in _skeletons(tool):
            node = root
            for piece in form:
                if isinstance(piece, _Free):
                    if node.edges:
                        raise PolicyError("a free string overlaps a literal (ambiguous tools)", code="grammar")
                    body = Node(free=True, limit=piece.limit)
                    node.edges = dict.fromkeys(FIRST_BYTES, body)
                    node = body
                    continue
                for byte in piece.encode("utf-8"):
                    if node.free and byte != QUOTE:
                        raise PolicyError("a free string overlaps a literal (ambiguous tools)", code="grammar")
                    node = node.edges.setdefault(byte, Node())
            node.final = True
    if not root.edges:
        raise PolicyError("no tool can be called", code="grammar")
    return root


@dataclass(eq=False)
class _VocabNode:
    children: dict[int, _VocabNode] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)


def _byte_alphabet() -> dict[int, str]:
    """Byte-level BPE's printable stand-in for each byte (GPT-2's layout: printable Latin-1 bytes are
    themselves, the others are shifted to U+0100 onwards in byte order)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in kept}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


def token_bytes(tokenizer: Any) -> dict[int, bytes]:
    """Each ordinary token's bytes, plus ``<tool_call>``/``</tool_call>`` as their text (other special tokens,
    end of turn included, are left out: the grammar never allows them inside a call). Byte-level BPE only (the
    recipe's tokenizer, GPT-2/Qwen style): another family is refused rather than guessed at."""
    to_byte = {ch: b for b, ch in _byte_alphabet().items()}
    special = set(tokenizer.all_special_ids) | set(tokenizer.get_added_vocab().values())
    out: dict[int, bytes] = {}
    for token, index in tokenizer.get_vocab().items():
        if index in special:
            if token in (OPEN.strip(), CLOSE.strip()):
                out[index] = token.encode("utf-8")
            continue
        try:
            out[index] = bytes(to_byte[ch] for ch in token)
        except KeyError as exc:
            raise PolicyError(f"token {token!r} is not byte-level BPE: constrained decoding needs a byte-level "
                               "tokenizer", code="grammar") from exc
    return out


class ToolCallConstraint:
    """Allowed next tokens for a call of the given tools; one instance per tokenizer, grammars cached by tools.

    ``<tool_call>``/``</tool_call>`` tokens match only where the call's own markers are, never inside a string.
    """

    def __init__(self, tokenizer: Any, *, cache_size: int = 256) -> None:
        self.eos = int(tokenizer.eos_token_id)
        self.root = _VocabNode()
        self.markers: dict[int, bytes] = {}
        markers = {OPEN.strip(), CLOSE.strip()}
        for index, raw in token_bytes(tokenizer).items():
            if not raw:
                continue
            if tokenizer.convert_ids_to_tokens(index) in markers:
                self.markers[index] = raw
                continue
            node = self.root
            for byte in raw:
                node = node.children.setdefault(byte, _VocabNode())
            node.tokens.append(index)
        self.cache_size = cache_size
        self._grammars: OrderedDict[str, _Grammar] = OrderedDict()

    def start(self, tools: Sequence[Mapping[str, Any]]) -> CallState:
        key = json.dumps(list(tools), sort_keys=True, ensure_ascii=False)
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = self._grammars[key] = _Grammar(self, build_grammar(tools))
            if len(self._grammars) > self.cache_size:
                self._grammars.popitem(last=False)
        else:
            self._grammars.move_to_end(key)
        return CallState(grammar, grammar.root)

    def successors(self, node: Node) -> dict[int, tuple[Node, int]]:
        """Every token allowed at ``node``: the node it leads to, and how many of its bytes are free-string
        contents (a walk of the vocabulary trie)."""
        out: dict[int, tuple[Node, int]] = {}
        stack: list[tuple[_VocabNode, Node, int]] = [(self.root, node, 0)]
        while stack:
            vocab, state, inside = stack.pop()
            for byte, child in vocab.children.items():
                nxt = state.step(byte)
                if nxt is None:
                    continue
                counted = inside + (1 if nxt.free else 0)
                for token in child.tokens:
                    out[token] = (nxt, counted)
                if child.children:
                    stack.append((child, nxt, counted))
        for token, raw in self.markers.items():
            at: Node | None = node
            for byte in raw:
                at = at.edges.get(byte) if at is not None else None
            if at is not None:
                out[token] = (at, 0)
        return out


class _Grammar:
    """One tool list's trie with its per-node caches: the successors, and the fewest tokens to finish."""

    def __init__(self, owner: ToolCallConstraint, root: Node) -> None:
        self.owner, self.root = owner, root
        self._successors: dict[int, dict[int, tuple[Node, int]]] = {}
        self._need: dict[int, int] = {}

    def successors(self, node: Node) -> dict[int, tuple[Node, int]]:
        found = self._successors.get(id(node))
        if found is None:
            found = self._successors[id(node)] = self.owner.successors(node)
        return found

    def need(self, node: Node) -> int:
        """The fewest tokens that complete the call from ``node``, end of turn included."""
        found = self._need.get(id(node))
        if found is None:
            if node.final:
                found = 1
            else:
                onward = [self.need(nxt) for nxt in {nxt for nxt, _ in self.successors(node).values()}
                          if nxt is not node]
                found = 1 + min(onward) if onward else 10**9
            self._need[id(node)] = found
        return found


class CallState:
    """One turn's position in the grammar: :meth:`allowed` before sampling, :meth:`advance` after."""

    def __init__(self, grammar: _Grammar, node: Node) -> None:
        self.grammar, self.node = grammar, node
        self.used = 0  # bytes of the free string being written

    def allowed(self, remaining: int) -> list[int]:
        """Tokens allowed next with ``remaining`` tokens left in the turn's budget (this one included): those that
        keep a free string within its length and from which the call can still be completed in time (all of
        them if none can: the turn then runs out)."""
        if self.node.final:
            return [self.grammar.owner.eos]
        successors = self.grammar.successors(self.node)
        limit = self.node.limit if self.node.free else None
        fits = []
        for token, (nxt, inside) in successors.items():
            bound = limit if limit is not None else nxt.limit if nxt.free else None
            if bound is not None and self.used + inside > bound:
                continue
            if self.grammar.need(nxt) <= remaining - 1:
                fits.append(token)
        return sorted(fits or successors)

    def advance(self, token: int) -> None:
        if self.node.final:
            return
        found = self.grammar.successors(self.node).get(token)
        if found is None:
            raise PolicyError(f"token {token} is not allowed here", code="grammar")
        nxt, inside = found
        self.used = self.used + inside if nxt.free else 0
        self.node = nxt
