"""Running the CLI in-process in tests, and the shape of its error output."""

from __future__ import annotations

from arsched.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Call the CLI in-process: (exit code, stdout, stderr)."""
    try:
        main(list(argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    else:
        code = 0
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str) -> None:
    """Bad input: exit code 2 and exactly one line on stderr starting with 'error:'."""
    assert code == 2
    assert err.startswith("error:"), err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
