"""Deterministic generator of the embedded default catalog (a raw source archive, docs/contract.md#catalog-archive).

``write_catalog(path, seed)`` writes the ``.json.gz`` archive and ``<path>.manifest.json``; the archive then
goes through the normal ``shopsimrl data prepare`` pipeline like the real one would.
"""

from .generator import (
    DEFAULT_SEED,
    GENERATOR_VERSION,
    CatalogStream,
    GeneratedCatalog,
    TaskAudit,
    build_catalog,
    generate_catalog,
)
from .layout import GeneratorConfig
from .writer import catalog_statistics, manifest_path_for, write_catalog

__all__ = [
    "DEFAULT_SEED",
    "GENERATOR_VERSION",
    "CatalogStream",
    "GeneratedCatalog",
    "GeneratorConfig",
    "TaskAudit",
    "build_catalog",
    "catalog_statistics",
    "generate_catalog",
    "manifest_path_for",
    "write_catalog",
]
