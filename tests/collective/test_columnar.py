"""The columnar `.npz` schedule format: the same schedule as the JSON (every field, both
ways), the same bytes for the same schedule, far smaller than the JSON at scale, chosen by
extension everywhere a schedule is loaded or saved (API and CLI), and one sentence for
every malformed or hostile file."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from test_serialize import NAMES, build

from arsched.algorithms import build as build_algorithm
from arsched.collective import dumps, load, save, validate
from arsched.collective.columnar import dumps_columnar
from arsched.errors import ScheduleFormatError
from arsched.limits import LimitError
from arsched.topology import parse_spec
from clihelp import assert_one_line_error, run


@pytest.mark.parametrize("name", NAMES)
def test_the_columnar_file_holds_the_json_schedule(tmp_path, name):
    s = build(name)
    save(s, tmp_path / "s.npz")
    back = load(tmp_path / "s.npz")
    assert dumps(back) == dumps(s)  # every field, byte for byte in the JSON form
    save(back, tmp_path / "again.npz")
    assert (tmp_path / "again.npz").read_bytes() == (tmp_path / "s.npz").read_bytes()
    assert (tmp_path / "s.npz").read_bytes() == dumps_columnar(s)


def test_it_is_compact_and_still_validates(tmp_path):
    s = build_algorithm("ring", parse_spec("fattree:k=8"), None, 1e8)
    save(s, tmp_path / "r.json")
    save(s, tmp_path / "r.npz")
    json_size, npz_size = (tmp_path / "r.json").stat().st_size, (tmp_path / "r.npz").stat().st_size
    assert npz_size * 20 < json_size
    assert validate(load(tmp_path / "r.npz")).ok


def _rewrite(data: bytes, name: str, array: np.ndarray | None = None, extra: bool = False) -> bytes:
    """The zip `data` with member `name`.npy replaced by `array` (or dropped), or one added."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != f"{name}.npy":
                dst.writestr(info, src.read(info))
            elif array is not None:
                buf = io.BytesIO()
                np.lib.format.write_array(buf, array, allow_pickle=False)
                dst.writestr(info.filename, buf.getvalue())
        if extra:
            dst.writestr("evil.npy", b"x")
    return out.getvalue()


def _pickled(data: bytes) -> bytes:
    """The zip `data` with its step column as a pickled object array."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename == "step.npy":
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.array([object()] * 3, dtype=object), allow_pickle=True)
                dst.writestr(info.filename, buf.getvalue())
            else:
                dst.writestr(info, src.read(info))
    return out.getvalue()


GOOD = dumps_columnar(build("ring-bcube"))
BAD = {
    "not a zip": (b"PK\x03\x04 broken", "not a readable"),
    "random bytes": (bytes(range(256)) * 4, "not a readable"),
    "a column missing": (_rewrite(GOOD, "op"), "columns"),
    "an extra member": (_rewrite(GOOD, "", extra=True), "columns"),
    "a float column": (_rewrite(GOOD, "step", np.zeros(3)), "int64"),
    "a 2-d column": (_rewrite(GOOD, "src", np.zeros((2, 2), dtype=np.int32)), "one-dimensional"),
    "columns of different lengths": (_rewrite(GOOD, "op", np.zeros(1, dtype=np.int8)), "differ in length"),
    "a node out of range": (
        _rewrite(GOOD, "path_nodes", np.full(len(build("ring-bcube").paths) * 3, 10**6, dtype=np.int32)),
        "path table|outside",
    ),
    "an inconsistent path table": (_rewrite(GOOD, "path_ptr", np.array([0, 5, 2])), "path table|int64"),
    "a header that is not JSON": (_rewrite(GOOD, "header", np.frombuffer(b"{nope", np.uint8)), "JSON"),
    "a header that is not UTF-8": (_rewrite(GOOD, "header", np.frombuffer(b"\xff\xfe", np.uint8)), "UTF-8"),
    "a JSON header of another kind": (_rewrite(GOOD, "header", np.frombuffer(b"[1, 2]", np.uint8)), "header"),
    "a pickled column": (_pickled(GOOD), "cannot be read|int64"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_file_is_one_sentence(tmp_path, case, capsys):
    data, words = BAD[case]
    path = tmp_path / "bad.npz"
    path.write_bytes(data)
    with pytest.raises(ScheduleFormatError, match=words):
        load(path)
    code, _, err = run(capsys, "validate", str(path))
    assert_one_line_error(code, err)


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    monkeypatch.setenv("ARSCHED_MAX_MEMORY", "1MB")
    path = tmp_path / "bomb.npz"
    huge = np.zeros(2_000_000, dtype=np.int64)  # 16 MB of zeros: a few kB deflated
    path.write_bytes(_rewrite(GOOD, "chunk", huge))
    assert path.stat().st_size < 200_000
    with pytest.raises(LimitError, match="memory"):
        load(path)


def test_the_cli_writes_and_reads_it_by_extension(tmp_path, capsys):
    out = tmp_path / "s.npz"
    code, _, _ = run(capsys, "schedule", "-t", "torus:dims=3x3", "-a", "ring", "-o", str(out))
    assert code == 0 and zipfile.is_zipfile(out)
    code, text, _ = run(capsys, "validate", str(out))
    assert code == 0 and text.startswith("OK")
    code, text, _ = run(capsys, "simulate", str(out), "--json")
    assert code == 0 and '"gap"' in text
