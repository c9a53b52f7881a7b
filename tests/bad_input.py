"""Bad input to `bench`, as the tests give it: one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import contextlib

import pytest

from harness import cli
from harness.launch import torchrun


@contextlib.contextmanager
def no_early_ranks():
    """Bad input launches nothing: the ranks' early imports (`torchrun.start_early`, a zygote process importing torch,
    begun by `bench` and `collectives` before their checks) would only be killed at the test's end, 0.2-0.4 s of a
    busy worker's wall and a process each (test_bench_input.py began 23, test_collectives.py 10). Where bench begins
    them and what ends them: tests/face/test_bench_provenance.py."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torchrun, "start_early", lambda *_, **__: None)
        yield


def refused(capsys, tmp_path, *args: str) -> str:
    results = tmp_path / "results"
    with no_early_ranks():
        try:
            code = cli.main(["bench", "--results", str(results), "--size", "tiny", "--steps", "1", *args])
        except SystemExit as exit_:  # argparse's own refusal
            code = exit_.code
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    assert not results.exists()  # nothing written
    return captured.err
