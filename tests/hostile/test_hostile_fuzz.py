"""Property: a valid schedule file with any of its fields replaced by an extreme or mistyped value
still gets `validate` and `simulate` to end with exit 0, 1 or 2, and exit 2 with one line."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clihelp import assert_one_line_error, run

BASE = json.loads((Path(__file__).resolve().parent / "schedules" / "ring3_valid.json").read_text())


def _locations(obj: Any, here: tuple = ()) -> list[tuple]:
    """Every place in the JSON tree (dict keys and list positions) that a value can replace."""
    places = [here] if here else []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for key, value in items:
        places += _locations(value, (*here, key))
    return places


LOCATIONS = _locations(BASE)
EXAMPLES = int(os.environ.get("ARSCHED_FUZZ_EXAMPLES", "60"))  # benchmarks/bench_fuzz.py raises it

EXTREME = st.one_of(
    st.sampled_from([10**400, -(10**400), 2**63, 2**63 - 1, -(2**63), 10**18, 0, -1, 1]),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "s0", "s9", "reduce", "copy", "x" * 300, "\udcff"[:0] + "é"]),
    st.none(),
    st.booleans(),
    st.lists(st.sampled_from(["s0", "s1", "s2", 0, None]), max_size=4),
    st.dictionaries(st.sampled_from(["id", "kind", "src"]), st.sampled_from(["s0", 1, None]), max_size=2),
)


def _replace(obj: Any, where: tuple, value: Any) -> None:
    for key in where[:-1]:
        obj = obj[key]
    obj[where[-1]] = value


def test_the_base_schedule_is_valid(capsys, tmp_path):
    path = tmp_path / "ring.json"
    path.write_text(json.dumps(BASE))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 0, out


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(LOCATIONS), EXTREME), min_size=1, max_size=3))
def test_mutated_schedule_keeps_the_contract(capsys, edits):
    obj = json.loads(json.dumps(BASE))
    for where, value in edits:
        try:
            _replace(obj, where, value)
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced the container
            continue
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutated.json"
        path.write_text(json.dumps(obj))
        for argv in (("validate", str(path)), ("simulate", str(path), "--json")):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                code, _, err = run(capsys, *argv)
            assert not caught, [str(w.message) for w in caught]
            assert code in (0, 1, 2), err[-2000:]
            if code == 2:
                assert_one_line_error(code, err)
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["mutated.json"]
