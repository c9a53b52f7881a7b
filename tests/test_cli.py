"""`ddpbench list` and `ddpbench env` print what a user needs to choose and to trust a run."""

from __future__ import annotations

import json

import impls
import workloads
from harness import cli


def test_list_names_every_strategy_and_workload_with_a_description(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in impls.names() + workloads.names():
        line = next(line for line in out.splitlines() if line.strip().startswith(name + " "))
        assert len(line.split(None, 1)[1]) > 10
    for name in workloads.names():  # each workload's sizes with their parameter counts
        index = out.splitlines().index(next(line for line in out.splitlines() if line.strip().startswith(name + " ")))
        sizes = out.splitlines()[index + 1]
        assert "tiny " in sizes and "small " in sizes and "full " in sizes


def test_env_is_json_with_versions_host_and_git(capsys):
    assert cli.main(["env"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["torch_version"] and env["hostname"] and env["cpu_count"] >= 1
    assert "git_sha" in env and "git_dirty" in env
    assert env["libraries"]["pyarrow"]
    assert env["gpu_count"] == len(env["gpus"])
