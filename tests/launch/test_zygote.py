"""The zygote forks each launch's agent: output into the launch's log, exit codes back, a fresh process
every time from one zygote; a zygote that cannot import leaves the launch to a fresh interpreter. On a GPU,
one that finds CUDA initialised forks nothing, and the launch starts its ranks fresh (no GPU here: torch's
answer is stood in for)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.config.ranks import FORK_RANKS, child_environment
from harness.launch import torchrun, zygote


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


def _module(tmp_path, name: str, body: str) -> dict[str, str]:
    """A rank module `name` in tmp_path; the environment that imports it (this checkout's harness too)."""
    (tmp_path / f"{name}.py").write_text(body)
    here = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), here])}


def test_the_gpu_zygote_refuses_to_fork_exactly_when_torch_says_cuda_is_initialised(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert zygote.fork_refusal("harness.rank.worker") is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert "CUDA was initialised in the GPU ranks' zygote by importing harness.rank.worker" in zygote.fork_refusal(
        "harness.rank.worker"
    )


def test_a_gpu_zygote_whose_imports_initialised_cuda_forks_nothing_and_its_launches_start_fresh(
    tmp_path, monkeypatch, caplog
):
    # What a module that started CUDA at import leaves: torch says it is initialised.
    env = _module(tmp_path, "cuda_at_import", "import torch\n\ntorch.cuda.is_initialized = lambda: True\n")
    monkeypatch.setattr(zygote, "_refused", {})
    started = []
    monkeypatch.setattr(torchrun.supervise, "start", lambda command, *, log, env: started.append(command) or "fresh")
    command = torchrun.torchrun_command("cuda_at_import", tmp_path / "p.json", local_ranks=1,
                                        rendezvous=torchrun.ONE_NODE_LAUNCH, fork_ranks=True)  # fmt: skip
    try:
        with open(tmp_path / "launch.log", "w") as log:
            for _ in range(2):
                assert torchrun._start(command, "cuda_at_import", log=log, env=env, fork=True, cuda=True) == "fresh"
        assert started == [[arg for arg in command if arg != FORK_RANKS]] * 2  # today's launch: fresh ranks
        assert zygote.for_launch("cuda_at_import", env, cuda=True) is None  # no zygote imports for it again
        said = [r.getMessage() for r in caplog.records if r.name == "ddpbench"]
        assert len(said) == 1 and "by importing cuda_at_import" in said[0] and "fresh interpreters" in said[0]
    finally:
        zygote.close_all()


RANK = """import os, sys


def main(argv):
    with open(argv[0], "w") as out:
        print(os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"), os.environ.get("DDPBENCH_FORKED_RANK"), file=out)
    return 0
"""


def test_a_gpu_zygote_with_cuda_untouched_forks_the_agent_which_forks_ranks_that_ask_nvml(tmp_path):
    env = _module(tmp_path, "nvml_rank", RANK)
    said = tmp_path / "rank.txt"
    command = torchrun.torchrun_command("nvml_rank", said, local_ranks=1, rendezvous=torchrun.ONE_NODE_LAUNCH,
                                        fork_ranks=True)  # fmt: skip
    try:
        gpu = zygote.for_launch("nvml_rank", env, cuda=True)
        assert gpu.cuda and zygote.for_launch("nvml_rank", env) is not gpu  # a CPU zygote is another one
        gpu = zygote.for_launch("nvml_rank", env, cuda=True)
        forked = gpu.start(command[3:], log=tmp_path / "launch.log", env=env)
        assert forked is not None and forked.wait(timeout=120) == 0, (tmp_path / "launch.log").read_text()
        assert said.read_text().split() == ["1", "1"]  # forked from the agent, CUDA's checks asked of NVML
    finally:
        zygote.close_all()


def test_a_gpu_runs_zygote_starts_once_the_device_is_known_and_its_first_launch_finds_it(monkeypatch):
    started = []

    class Stub:  # what for_launch keeps of a zygote, without its process
        def __init__(self, module, env, *, cuda=False):
            self.module, self.env, self.cuda = module, env, cuda
            started.append(self)

        def alive(self):
            return True

    monkeypatch.setattr(zygote, "Zygote", Stub)
    monkeypatch.setattr(zygote, "_running", {})
    torchrun.start_worker_early(local_ranks=8, device="cuda")
    first_launch = zygote.for_launch(torchrun.WORKER, child_environment(1), cuda=True)  # a GPU rank's one thread
    assert started == [first_launch] and first_launch.cuda
