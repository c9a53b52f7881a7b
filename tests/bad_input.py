"""Bad input to `bench`, as the tests give it: one line on stderr, exit 2, nothing written."""

from __future__ import annotations

from harness import cli


def refused(capsys, tmp_path, *args: str) -> str:
    results = tmp_path / "results"
    try:
        code = cli.main(["bench", "--results", str(results), "--size", "tiny", "--steps", "1", *args])
    except SystemExit as exit_:  # argparse's own refusal
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    assert not results.exists()  # nothing written
    return captured.err
