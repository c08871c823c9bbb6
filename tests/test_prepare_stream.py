"""Streaming prepare (issue 14 item 2): the archive read and written a chunk at a time, with the same outputs.

Properties: any JSON array, however it is laid out and wherever the read blocks cut it, streams to exactly the
elements ``json.loads`` gives; anything that is not a JSON array is refused with an ``DataError`` (``archive``); the
streamed writer's bytes equal ``gzip_deterministic(dump_archive_json(records))``. End to end: preparing with
a chunk of 3 records gives byte-identical files to one chunk, and a duplicate ASIN across chunks is refused.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from error_kinds import raises_kind
from shopsimrl.catalog import PrepareOptions, archive_stream, prepare, prepare_dataset
from shopsimrl.catalog.archive import dump_archive_json, gzip_deterministic
from shopsimrl.catalog.archive_stream import ArchiveWriter, iter_archive_records
from shopsimrl.errors import DataError

FIXTURE_ARCHIVE = Path(__file__).parent / "data" / "fixture_catalog.json"
OPTIONS = PrepareOptions(test_size=2, val_size=2)

_scalars = st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(elements=st.lists(_json, max_size=6), indent=st.sampled_from([None, 0, 1, 3]), block=st.integers(1, 40),
       gzipped=st.booleans())
def test_any_array_streams_to_its_elements(tmp_path_factory, monkeypatch, elements, indent, block, gzipped) -> None:
    monkeypatch.setattr(archive_stream, "READ_BLOCK", block)
    text = json.dumps(elements, indent=indent, ensure_ascii=block % 2 == 0)
    path = tmp_path_factory.mktemp("stream") / "a.json"
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    assert list(iter_archive_records(path)) == json.loads(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet='[]{},:"0123456789 .-enulrtfas', max_size=30), block=st.integers(1, 8))
def test_anything_else_is_refused_or_streams_like_json_loads(tmp_path_factory, monkeypatch, text, block) -> None:
    monkeypatch.setattr(archive_stream, "READ_BLOCK", block)
    path = tmp_path_factory.mktemp("stream") / "a.json"
    path.write_text(text, "utf-8")
    try:
        expected = json.loads(text)
    except ValueError:
        expected = None
    if isinstance(expected, list):
        assert list(iter_archive_records(path)) == expected
    else:
        with raises_kind(DataError, "archive"):
            list(iter_archive_records(path))


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    cases = {
        "obj.json": ('{"a": 1}', "top-level JSON array"),
        "cut.json": ('[{"a": 1}, {"b": ', "not valid JSON"),
        "extra.json": ("[1] 2", "extra data"),
        "deep.json": ("[" + "[" * 100_000 + "]" * 100_000 + "]", "nested too deeply"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text, "utf-8")
        with raises_kind(DataError, "archive", match=message):
            list(iter_archive_records(tmp_path / name))
    (tmp_path / "latin1.json").write_bytes(b'["\xe9"]')
    with raises_kind(DataError, "archive", match="not UTF-8"):
        list(iter_archive_records(tmp_path / "latin1.json"))


def test_the_streamed_writer_gives_the_one_shot_bytes(tmp_path: Path) -> None:
    records = json.loads(FIXTURE_ARCHIVE.read_text("utf-8")) * 3
    for count in (0, 1, len(records)):
        writer = ArchiveWriter(tmp_path / f"out{count}.json.gz")
        for record in records[:count]:
            writer.add(record)
        data_sha, file_sha = writer.finish()
        expected = gzip_deterministic(dump_archive_json(records[:count]))
        assert (tmp_path / f"out{count}.json.gz").read_bytes() == expected
        assert data_sha == prepare.sha256_hex(dump_archive_json(records[:count]))
        assert file_sha == prepare.sha256_hex(expected)


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
            and p.name != ".verified.json"}


def test_small_chunks_give_byte_identical_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prepare_dataset(FIXTURE_ARCHIVE, tmp_path / "one", options=OPTIONS)
    monkeypatch.setattr(prepare, "PREPARE_CHUNK", 3)
    prepare_dataset(FIXTURE_ARCHIVE, tmp_path / "many", options=OPTIONS)
    one, many = _files(tmp_path / "one"), _files(tmp_path / "many")
    assert one == many
    assert "records/goals.jsonl" in one and "search/postings_pair_docs.npy" in one
    assert not (tmp_path / "many" / prepare.BUILD_DIR).exists()


def test_a_duplicate_asin_in_a_later_chunk_is_refused_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = json.loads(FIXTURE_ARCHIVE.read_text("utf-8"))
    records.append({**records[0], "instructions": [{**records[0]["instructions"][0], "task_id": 999}]})
    archive = tmp_path / "dup.json"
    archive.write_text(json.dumps(records, ensure_ascii=False), "utf-8")
    monkeypatch.setattr(prepare, "PREPARE_CHUNK", 4)
    out = tmp_path / "out"
    with raises_kind(DataError, "archive", match=r"record 17 .*duplicate ASIN \(first seen at record 0\)"):
        prepare_dataset(archive, out, options=OPTIONS)
    assert not out.exists() or not any(out.iterdir())


def test_a_failed_force_rebuild_keeps_the_previous_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    prepare_dataset(FIXTURE_ARCHIVE, out, options=OPTIONS)
    before = _files(out)
    broken = tmp_path / "broken.json"
    shutil.copy(FIXTURE_ARCHIVE, broken)
    broken.write_text(broken.read_text("utf-8")[:-40], "utf-8")
    with raises_kind(DataError, "archive"):
        prepare_dataset(broken, out, options=OPTIONS, force=True)
    assert _files(out) == before
