"""Rankings and positives files are decoded by orjson, with the standard library's errors.

orjson reads what json reads, faster, but refuses some files json reads (NaN, a byte order
mark, UTF-16), reads integers past 64 bits as floats and nests deeper; every message must
still be the one json's reading gives. The array checks of `mitl.id_lists` must accept
exactly what the per-list checks accept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from mitl.evaluation_inputs import (
    EvaluationError,
    _id_lists_checked,
    keyed_rankings_read,
    rankings_parse,
    rankings_read,
    release_load,
)
from mitl.id_lists import id_lists_fast
from mitl.ranking_limits import UNLIMITED, RankingLimits, rankings_from_bytes
from mitl.release_files import I2T_FILE, T2I_FILE


def json_error(raw: bytes) -> str:
    """Return the message of the standard library's refusal of `raw`."""
    try:
        json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return str(exc)
    raise AssertionError("json reads it")


def read_error(path: Path, raw: bytes) -> str:
    path.write_bytes(raw)
    with pytest.raises(EvaluationError) as caught:
        rankings_read(path)
    return str(caught.value)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"i2t": {"1": [\xff]}, "t2i": {}}',  # invalid UTF-8
        b'{"i2t": {"1": ["\xc3\x28"]}, "t2i": {}}',
        b'{"i2t": {"1": [1, 2,]}, "t2i": {}}',  # orjson words these differently
        b'{"i2t": {"1": [01]}, "t2i": {}}',
        b'{"i2t": {}, "t2i": {}} trailing',
        b"",
    ],
)
def test_undecodable_files_get_the_standard_librarys_message(tmp_path, raw):
    path = tmp_path / "model.json"
    assert read_error(path, raw) == f"{path}: not valid JSON ({json_error(raw)})"
    with pytest.raises(EvaluationError) as caught:
        rankings_from_bytes(raw, UNLIMITED)
    assert str(caught.value) == f"not valid JSON ({json_error(raw)})"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        # json reads NaN and Infinity as floats; orjson refuses them
        (b'{"i2t": {"1": [1, NaN]}, "t2i": {}}', "list of integer ids (found nan)"),
        (b'{"i2t": {"1": [Infinity]}, "t2i": {}}', "list of integer ids (found inf)"),
        # orjson would make floats of these; json keeps the integers the message quotes
        (b'{"i2t": {"1": [18446744073709551616]}, "t2i": {}}', "holds 18446744073709551616, not"),
        (b'{"i2t": {"1": [-9223372036854775809]}, "t2i": {}}', "holds -9223372036854775809, not"),
        (b'{"i2t": {"1": [9223372036854775808]}, "t2i": {}}', "holds 9223372036854775808, not"),
        (b'{"i2t": {"1": [1e3]}, "t2i": {}}', "list of integer ids (found 1000.0)"),
        (b'{"i2t": {"1": [2, true]}, "t2i": {}}', "list of integer ids (found True)"),
        (b'{"i2t": {"1": [false]}, "t2i": {}}', "list of integer ids (found False)"),
        (b'{"i2t": {"1": [null]}, "t2i": {}}', "list of integer ids (found None)"),
        (b'{"i2t": {"1": [3, 4, 3]}, "t2i": {}}', "the list of '1' holds 3 twice"),
        (b'{"i2t": {"1": [1], "01": [2]}, "t2i": {}}', "id 1 appears twice as a key"),
        (b'{"i2t": {"+1": [1]}, "t2i": {}}', "key '+1' is not an integer id"),
        (b'{"i2t": {"\\u0661": [1]}, "t2i": {}}', "key '\u0661' is not an integer id"),
        (b'{"i2t": {"18446744073709551616": [1]}, "t2i": {}}', "is not an id of at most 64"),
    ],
)
def test_ids_json_reads_differently_get_the_messages_of_jsons_reading(tmp_path, raw, words):
    message = read_error(tmp_path / "model.json", raw)
    assert words in message
    with pytest.raises(EvaluationError) as caught:
        rankings_parse(json.loads(raw))
    assert message == f"{tmp_path / 'model.json'}: {caught.value}"


def test_nesting_json_refuses_is_refused_though_orjson_reads_it(tmp_path):
    depth = 1010  # deeper than json's recursion limit, within orjson's 1024
    raw = b'{"i2t": {"1": ' + b"[" * depth + b"]" * depth + b'}, "t2i": {}}'
    path = tmp_path / "model.json"
    assert re.fullmatch(
        rf"{re.escape(str(path))}: not valid JSON \(maximum recursion .*\)", read_error(path, raw)
    )
    with pytest.raises(EvaluationError, match=r"^not valid JSON \(arrays or objects are nested"):
        rankings_from_bytes(raw, UNLIMITED)


@pytest.mark.parametrize(
    "raw",
    [
        b'\xef\xbb\xbf{"i2t": {"1": [2, 3]}, "t2i": {"2": [1]}}',  # a byte order mark
        '{"i2t": {"1": [2, 3]}, "t2i": {"2": [1]}}'.encode("utf-16"),
        b'{"i2t": {"1": [7], "1": [2, 3]}, "t2i": {"2": [1]}}',  # the last of a repeated key
        b'{"i2t": {"\\u0031": [2, 3]}, "t2i": {"2": [1]}}',
    ],
)
def test_files_json_reads_are_read_as_json_reads_them(tmp_path, raw):
    path = tmp_path / "model.json"
    path.write_bytes(raw)
    assert rankings_read(path) == {"i2t": {1: [2, 3]}, "t2i": {2: [1]}}
    assert rankings_from_bytes(raw, UNLIMITED) == {"i2t": {1: [2, 3]}, "t2i": {2: [1]}}


def test_limits_are_refused_with_the_same_words_after_orjson(tmp_path):
    limits = RankingLimits(max_bytes=None, max_depth=2, max_queries={"i2t": 1, "t2i": 1})
    with pytest.raises(EvaluationError, match=r"the list of '1' has 3 ids, more than the 2"):
        rankings_from_bytes(b'{"i2t": {"1": [1, 2, 3]}, "t2i": {}}', limits)
    with pytest.raises(EvaluationError, match=r"rankings i2t ranks 2 queries, more than the 1"):
        rankings_from_bytes(b'{"i2t": {"1": [1], "2": [1]}, "t2i": {}}', limits)


def test_positives_and_keyed_rankings_files_get_jsons_messages(tmp_path):
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / I2T_FILE).write_text('{"1": [11]}')
    (folder / T2I_FILE).write_bytes(b'{"11": [1, NaN]}')
    with pytest.raises(EvaluationError) as caught:
        release_load(folder)
    assert str(caught.value) == (
        f"{folder / T2I_FILE}: positives: the value of '11' must be a list of integer ids "
        "(found nan)"
    )
    (folder / T2I_FILE).write_bytes(b'{"11": [\xff]}')
    with pytest.raises(EvaluationError, match=r"not valid JSON \('utf-8' codec can't decode"):
        release_load(folder)
    keyed = tmp_path / "keyed.json"
    keyed.write_bytes(b'{"swap": {"1": [2, 2]}}')
    with pytest.raises(EvaluationError, match=r"keyed\.json: swap: the list of '1' holds 2 twice"):
        keyed_rankings_read(keyed, ["swap"])
    keyed.write_bytes(b'{"swap": {"1": [3, 2]}}')
    assert keyed_rankings_read(keyed, ["swap"]) == {"swap": {1: [3, 2]}}


ID_MAX = 2**63 - 1


def cases() -> list[object]:
    """Maps of id lists, good and bad, of many shapes (ragged, padded, with extreme ids)."""
    rng = np.random.default_rng(0)
    found: list[object] = [
        {},
        {"1": []},
        {"1": [], "2": [5]},
        {"1": [0, 1], "2": [1, 0]},
        {"1": [ID_MAX, 5], "2": [ID_MAX]},  # the padding value as an id
        {"1": [ID_MAX, ID_MAX], "2": [1]},
        {"1": [5, 6, 7], "2": [8]},
        {"1": [5, 6, 5], "2": [8]},
        {"1": [5], "2": [8, 9, 8, 7]},
        {"1": [-(2**63), 2], "2": [-(2**63)]},
        {"1": list(range(500)), **{str(i): [i] for i in range(2, 40)}},  # very unequal
        {"1": [*range(500), 3], **{str(i): [i] for i in range(2, 40)}},
        {"1": [1, 2], **{str(i): [i, i] for i in range(2, 40)}},
        # very unequal, and ids too far apart to be keyed by (list, id) in one number
        {"1": [-(2**63), *range(500), ID_MAX], **{str(i): [i, -i] for i in range(2, 40)}},
        {"1": [-(2**63), *range(500), ID_MAX], "2": [ID_MAX, 3, ID_MAX], "3": [4]},
        {"1": [-(2**63), *range(500), 7], **{str(i): [i] for i in range(2, 40)}},
        {"1": [True]},
        {"1": [5, 1], "2": [0, 7], "3": [], "4": [2, True]},  # ids 0 and 1 beside bools
        {"1": [0, 1], "2": [3, False]},
        {"1": [np.int64(3)]},
        {"1": [2**63]},
        {"1": [1.0]},
        {"1": (1, 2)},
        {1: [1, 2]},
        {"-5": [1], "5": [2]},
        {"-0": [1], "0": [2]},
        {" 1": [1]},
        [],
    ]
    for _ in range(40):
        n = int(rng.integers(1, 30))
        lengths = rng.integers(0, 12, size=n)
        lists = [rng.integers(-5, 40, size=int(m)).tolist() for m in lengths]
        found.append(
            {str(int(q)): ids for q, ids in zip(rng.permutation(60)[:n], lists, strict=True)}
        )
    return found


@pytest.mark.parametrize("data", cases())
@pytest.mark.parametrize("json_types", [False, True])
def test_the_array_checks_accept_exactly_what_the_per_list_checks_accept(data, json_types):
    if json_types and any(
        type(i) is not int and type(i) is not bool
        for ids in (data.values() if isinstance(data, dict) else [])
        for i in (ids if isinstance(ids, list) else [])
    ):
        pytest.skip("JSON holds no such values")
    fast = id_lists_fast(data, max_length=None, max_keys=None, json_types=json_types)
    try:
        expected = _id_lists_checked(data, what="x", max_length=None, max_keys=None)
    except EvaluationError:
        assert fast is None
    else:
        if fast is not None:
            assert fast == expected
            assert list(fast) == list(expected)
        else:  # only what the array checks do not look at: int keys, tuples
            assert any(type(key) is not str for key in data) or any(
                type(ids) is not list for ids in data.values()
            )


def test_the_array_checks_hold_to_the_limits():
    data = {"1": [1, 2, 3], "2": [4]}
    assert id_lists_fast(data, max_length=3, max_keys=2, json_types=True) == {1: [1, 2, 3], 2: [4]}
    assert id_lists_fast(data, max_length=2, max_keys=2, json_types=True) is None
    assert id_lists_fast(data, max_length=3, max_keys=1, json_types=True) is None
