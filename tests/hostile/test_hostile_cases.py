"""The cases issue 20 (section 3) names for schedules, MSCCL XML, topologies, bounds and units:
each ends with the exit code and the sentence given here (before, most were tracebacks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clihelp import assert_one_line_error, run

HERE = Path(__file__).resolve().parent
S, T, M = HERE / "schedules", HERE / "topologies", HERE / "msccl"


def _strict_json(text: str) -> object:
    """Parse JSON as a strict reader would: Infinity and NaN are not JSON."""

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


ERRORS = {
    # extreme numbers in schedule JSON, for every command that reads one
    **{
        f"{cmd}-bytes-10^400": ((cmd, str(S / "bytes_10e400_int.json"), *extra), "bytes 10^400")
        for cmd, extra in (("validate", ()), ("simulate", ()), ("export", ("-o", "x.xml")))
    },
    **{
        f"{cmd}-step-10^30": ((cmd, str(S / "step_10e30.json"), *extra), "step 10^30, beyond the int64")
        for cmd, extra in (("validate", ()), ("simulate", ()), ("export", ("-o", "x.xml")))
    },
    "validate-chunk-10^30": (("validate", str(S / "chunk_10e30.json")), "chunk 10^30"),
    "validate-num-chunks-10^30": (("validate", str(S / "num_chunks_10e30.json")), "num_chunks 10^30"),
    "simulate-num-chunks-10^18": (
        ("simulate", str(S / "num_chunks_10e18.json")),
        "is not a valid AllReduce: at the end rank s0 holds chunk 3",
    ),
    "export-num-chunks-10^18": (("export", str(S / "num_chunks_10e18.json"), "-o", "x.xml"), "chunk 3"),
    # MSCCL XML
    **{
        f"import-{name}": (("import", str(M / f"{name}.xml"), "-t", "ring:n=3", "-o", "x.json"), words)
        for name, words in (
            ("nchunksperloop_1e19", "nchunksperloop='1e19', which is not an integer"),
            ("nchunksperloop_10e19", "nchunksperloop='10000000000000000000', outside the int64 range"),
            ("billion_laughs", "declares a DTD"),
            ("external_entity", "declares a DTD"),
        )
    },
    "graphml-billion-laughs": (("topology", str(T / "billion_laughs.graphml")), "declares a DTD"),
    "graphml-external-entity": (("topology", str(T / "external_entity.graphml")), "declares a DTD"),
    "graphml-bandwidth-fast": (
        ("topology", str(T / "bandwidth_fast.graphml")),
        "the bandwidth of edge 'a'-'b' of graph 'bandwidth_fast' is 'fast', which is not a number",
    ),
    # topology specs and files
    "jellyfish-seed--1": (
        ("topology", "jellyfish:switches=16,ports=4,net_ports=3,seed=-1"),
        "jellyfish needs a seed that is a non-negative integer, got seed=-1",
    ),
    "bcube-n-twice": (("topology", "bcube:n=4,k=1,n=5"), "parameter n is given twice"),
    "hostlist-not-utf8": (("topology", str(T / "not_utf8.csv")), "is not UTF-8 text (byte 15 is 0xff)"),
    # units and bounds
    "bound-size-1e400": (("bound", "-t", "ring:n=4", "--size", "1e400", "--json"), "size '1e400'"),
    "bound-alpha-1e400s": (("bound", "-t", "ring:n=4", "--alpha", "1e400s", "--json"), "time '1e400s'"),
    "bound-overflows": (
        ("bound", "-t", str(T / "all_links_1e-300.json"), "--size", "1GB", "--json"),
        "the allreduce bound s of 1GB on ring(3) is inf",
    ),
    "bandwidths-add-up-past-a-float": (
        ("topology", str(T / "all_links_1.7e308.json"), "--json"),
        "add up to more than a float holds",
    ),
    "simulate-overflows": (
        ("simulate", str(S / "link_bandwidth_1e-300_bytes_1e12.json"), "--json"),
        "the simulated time of",
    ),
    # a subnormal bandwidth (issue 20, section 2): refused where the topology is read
    **{
        f"{argv[0]}-subnormal-bandwidth": (
            argv,
            "link s0->s1 in ring(3) has bandwidth "
            + ("5e-324" if "subnormal" in argv[1] else "1e-310")
            + " bytes/s, below the smallest normal float (2.23e-308)",
        )
        for argv in (
            ("simulate", str(S / "link_bandwidth_subnormal.json"), "--json"),
            ("validate", str(S / "link_bandwidth_subnormal.json")),
            ("topology", str(T / "one_link_1e-310.json"), "--json"),
            ("bound", "-t", str(T / "one_link_1e-310.json"), "--json"),
        )
    },
    "spec-subnormal-bandwidth": (
        ("topology", "star:n=4,bandwidth=1e-310"),
        "has bandwidth 1e-310 bytes/s, below the smallest normal float",
    ),
    # algorithms' options
    "tree-packing-chunks": (
        ("schedule", "-t", "ring:n=4", "-a", "tree-packing", "--chunks", "8", "-o", "x.json"),
        "tree-packing takes no --chunks; its parameters are units, stages, alpha, iterations, seed, levels",
    ),
}


@pytest.mark.parametrize(("argv", "words"), list(ERRORS.values()), ids=list(ERRORS))
def test_issue_case_is_one_sentence(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, err)
    assert words in err, err
    assert out == "" and not list(tmp_path.iterdir())


def test_deep_json_is_one_sentence(capsys, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for argv in (("validate", str(deep)), ("topology", str(deep)), ("bound", "-t", str(deep))):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err)
        assert "nests JSON arrays or objects too deeply to read" in err


def test_csv_field_over_the_csv_limit_is_one_sentence(capsys, tmp_path):
    hosts = tmp_path / "hosts.csv"
    hosts.write_text("ip,DSW,PSW,ASW\n" + "a" * 140_000 + ",d,p,a\nb,d,p,a\n")
    code, _, err = run(capsys, "topology", str(hosts))
    assert_one_line_error(code, err)
    assert f"host list {hosts} is not readable CSV (field larger than field limit" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("validate", "{d}"),
        ("simulate", "{d}"),
        ("export", "{d}", "-o", "x.xml"),
        ("import", "{d}", "-t", "ring:n=3", "-o", "x.json"),
        ("topology", "{d}"),
        ("bound", "-t", "{d}"),
    ],
    ids=lambda a: a[0],
)
def test_a_folder_given_as_a_file_is_called_a_folder(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "results.json"
    folder.mkdir()
    code, _, err = run(capsys, *(a.replace("{d}", str(folder)) for a in argv))
    assert_one_line_error(code, err)
    assert f"{folder} is a folder, not a file" in err


def test_num_chunks_10_18_gets_the_validators_finite_answer(capsys):
    code, out, err = run(capsys, "validate", str(S / "num_chunks_10e18.json"))
    assert (code, err) == (1, "")
    assert "at the end rank s0 holds chunk 3 summed over 1 of 3 ranks (missing s1, s2)" in out
    code, out, err = run(capsys, "validate", "--numeric", str(S / "one_rank_10e18_chunks.json"))
    assert (code, err) == (0, "")
    assert "1 ranks x 1000000000000000000 chunks match the true AllReduce result" in out


def test_a_link_of_1e_300_beside_normal_ones_has_a_finite_bound(capsys):
    code, out, err = run(capsys, "simulate", str(S / "link_bandwidth_1e-300.json"), "--json")
    assert (code, err) == (0, "")
    result = _strict_json(out)
    assert result["time_s"] > 1e300 and 0 < result["bound_s"] < 1e-3
    code, out, err = run(capsys, "bound", "-t", str(T / "one_link_1e-300.json"), "--json")
    assert (code, err) == (0, "")
    bound = _strict_json(out)
    # the slow link is bypassed: one rank alone still sends at 100 Gb/s over its other cable
    assert bound["binding_cut"]["egress_bytes_per_s"] == pytest.approx(12.5e9)
