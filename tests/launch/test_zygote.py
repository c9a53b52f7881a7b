"""The zygote forks each launch's agent: output into the launch's log, exit codes back, a fresh process
every time from one zygote; a zygote that cannot import leaves the launch to a fresh interpreter."""

from __future__ import annotations

import os

from harness.launch import zygote


def test_each_launch_is_a_fresh_agent_forked_by_one_zygote_with_its_log_and_exit_code(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    first = zygote.for_launch("harness.rank.collectives", env)
    try:
        assert zygote.for_launch("harness.rank.collectives", env) is first  # one zygote per run
        helped = first.start(["--help"], log=tmp_path / "help.log", env=env)
        assert helped.wait(timeout=120) == 0 and helped.pid != first.process.pid
        assert "usage:" in (tmp_path / "help.log").read_text()  # torchrun's own, into the launch's log
        refused = first.start(["--no-such-flag"], log=tmp_path / "bad.log", env=env)
        assert refused.wait(timeout=60) == 2  # argparse's exit code, as from `python -m harness.launch.agent`
        assert "agent.py: error:" in (tmp_path / "bad.log").read_text()
        assert refused.pid not in (helped.pid, first.process.pid) and first.alive()

        other = zygote.for_launch("harness.rank.collectives", {**env, "OMP_NUM_THREADS": "7"})
        assert other is not first and not first.alive()  # a changed environment gets a zygote of its own
    finally:
        zygote.close_all()


def test_a_zygote_that_cannot_import_its_module_leaves_the_launch_to_a_fresh_process(tmp_path):
    broken = zygote.Zygote("harness.no_such_module", dict(os.environ))
    try:
        assert broken.start(["--help"], log=tmp_path / "x.log", env=dict(os.environ)) is None
        assert not broken.alive()
    finally:
        broken.close()
