"""reachtui.jsonl: the one JSONL reader (task files and imported generations)."""

import gzip

import pytest

from reachtui import jsonl
from reachtui.errors import ReachError


def test_objects_of_non_blank_lines_with_their_line_numbers(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n   \r\n{"b": "\xc3\xa9"}\r\n')
    assert list(jsonl.objects(path)) == [(1, {"a": 1}), (4, {"b": "é"})]


def test_gzip_is_read_through_unless_the_caller_says_not(tmp_path):
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n'))
    assert list(jsonl.objects(path)) == [(1, {"a": 1})]
    with pytest.raises(ReachError, match="a.jsonl.gz:1: not UTF-8 text"):
        list(jsonl.objects(path, gz=False))


@pytest.mark.parametrize("data, message", [
    (b'{"a": 1}\n{"a": \xff}\n', r"t\.jsonl:2: not UTF-8 text"),
    (b'{"a": 1}\n\n{"a": \n', r"t\.jsonl:3: bad JSON: Expecting value \(column 7\)"),
    (b'[1, 2]\n', r"t\.jsonl:1: expected a JSON object, not list"),
    (b'\x1f\x8bnot gzip', r"t\.jsonl: not a readable gzip file"),
])
def test_malformed_lines_are_one_error_naming_file_and_line(tmp_path, data, message):
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    with pytest.raises(ReachError, match=message):
        list(jsonl.objects(path))


def test_unreadable_paths(tmp_path):
    with pytest.raises(ReachError, match="nope.jsonl: no such file"):
        list(jsonl.objects(tmp_path / "nope.jsonl"))
    with pytest.raises(ReachError, match="is a folder, not a file"):
        list(jsonl.objects(tmp_path))
    with pytest.raises(ReachError, match="^shown: no such file"):
        jsonl.read_bytes(tmp_path / "nope.jsonl", "shown")


def test_lines_split_across_chunks_as_splitlines_splits_the_whole():
    """The stream reader (gzip imports) splits lines across chunk boundaries (a \\r\\n cut in two included)
    and counts runs of blank lines without splitting them: the same non-blank lines, with the same numbers,
    as `bytes.splitlines` of the whole file."""
    import random

    rng = random.Random(0)
    for _ in range(5000):
        data = b"".join(rng.choice([b"\n", b"\r", b"\r\n", b"  ", b"x", b"{}", b"\n\n", b" \r\n "])
                        for _ in range(rng.randint(0, 30)))
        cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(0, 6))))
        chunks = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        got = [(n, line) for n, line in jsonl._lines(chunks, "t") if line.strip()]
        assert got == [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()], (data, chunks)


def test_a_line_longer_than_the_limit_is_one_error(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl, "MAX_LINE", 1000)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n' + b"9" * 5000 + b"\n"))
    with pytest.raises(ReachError, match=r"t\.jsonl\.gz:2: a line longer than"):
        list(jsonl.objects(path))
