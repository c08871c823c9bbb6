"""Frozen version strings of the behavioural contract (docs/contract.md#versions).

They travel in manifests, reset payloads and reward details so that traces and
checkpoints made on the reference environment can be matched with this one.
"""

from .contract import MULTI_TURN, SINGLE_TURN

ENVIRONMENT_VERSION = "shopsimulator-paper-aligned-v8"
TOOL_VERSION = "shopping-tools-paper-v4"
CATALOG_FILTER_VERSION = "single-price-axis-v1"
MAX_PRICE_AFFECTING_AXES = 1
SEARCH_VERSION = "shopsimulator-multifield-bm25-v3"
INDEX_SCHEMA_VERSION = 1
OPTION_DOCUMENT_VERSION = "public-axis-value-v1"
QUERY_NORMALIZER_VERSION = "nfkc-casefold-basic-punctuation-v1"
TOKENIZER_VERSION = "han-bigram-latin-number-v1"
TIE_BREAKER = "asin-ascending"
REWARD_VERSION = "shopsimulator-paper-reward-v2"
PRIMARY_REWARD = "r_strict"
BUDGET_PARSER_VERSION = "instruction-budget-v1"
VARIANT_PRICE_VERSION = "variant-price-paper-v2"
OBSERVATION_VERSION = "shopping-observation-v7"
DATASET_SCHEMA_VERSION = "shopsimulator-cleaned-v2"
SOURCE_SPLITS_VERSION = "shopsimulator-stable-task-splits-v2"
PERSONA_SPLITS_VERSION = "shopsimrl-persona-splits-v1"
PERSONA_SPLITS_POLICY = "exact-linked-components-v1"
TRACE_SCHEMA_VERSION = "shopsimrl-episode-v4"

REPORTED_METRICS = (
    "r_loose",
    "r_strict",
    "r_success",
    "r_type",
    "r_att",
    "r_option",
    "r_price",
    "target_asin_match",
    "price_verifiable",
)

SEARCH_TOP_K = 150
PAGE_SIZE = 20
EPISODE_LIMITS = {SINGLE_TURN: 30, MULTI_TURN: 40}

# Dialogue mode: the ``dialogue`` block of observation_state, the ``ask_user`` tool, the rule shopper.
DIALOGUE_OBSERVATION_VERSION = "shopsimrl-dialogue-observation-v1"
DIALOGUE_TOOL_VERSION = "shopsimrl-dialogue-tools-v1"
RULE_SHOPPER_VERSION = "shopsimrl-rule-shopper-v1"
MAX_QUESTION_CHARS = 200
DEFAULT_MAX_QUESTIONS = 10
LLM_SHOPPER_VERSION = "shopsimrl-llm-shopper-v1"  # the LLM shopper's prompt and request protocol (dialogue/llm_shopper.py)
