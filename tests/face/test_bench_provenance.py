"""What `bench` records before its first launch: run.json's environment with the math flags the
ranks will run with, the resolved precision in every configuration, the sampler period once."""

from __future__ import annotations

import json

import pytest
import torch

from harness import cli
from harness.commands import bench
from harness.commands.console import plan as plan_lines
from harness.measure import env

FLAGS = ("float32_matmul_precision", "tf32_matmul", "tf32_cudnn", "cudnn_benchmark", "cudnn_deterministic")


def new_run_json(tmp_path, *flags: str) -> dict:
    args = cli.build_parser().parse_args(
        ["bench", "--results", str(tmp_path), "--run-id", "r", "--impls", "naive", "--size", "tiny", *flags]
    )
    _, plan = bench.new_run(args, command=("ddpbench", "bench", *flags))
    return json.loads((plan.run / "run.json").read_text())


def test_run_json_records_the_ranks_tf32_flags_not_the_launchers(tmp_path):
    launcher = env.precision_flags()
    meta = new_run_json(tmp_path, "--tf32")
    environment = meta["environment"]
    assert environment["tf32_matmul"] is True and environment["tf32_cudnn"] is True
    assert environment["float32_matmul_precision"] == "high"
    assert env.precision_flags() == launcher  # the launcher itself is left as it was
    assert {c["tf32"] for c in meta["configurations"]} == {True}
    assert meta["config"]["tf32"] is True


def test_by_default_run_json_says_tf32_off_everywhere_and_the_dtype_auto_resolved(tmp_path):
    meta = new_run_json(tmp_path)
    environment = meta["environment"]
    assert {key: environment[key] for key in FLAGS} == {
        "float32_matmul_precision": "highest", "tf32_matmul": False, "tf32_cudnn": False,
        "cudnn_benchmark": torch.backends.cudnn.benchmark, "cudnn_deterministic": torch.backends.cudnn.deterministic,
    }  # fmt: skip
    assert meta["config"]["dtype"] == "auto"
    expected = "bf16" if meta["device"] == "cuda" and bench._native_bf16() else "fp32"
    assert {c["dtype"] for c in meta["configurations"]} == {expected}
    for key in ("gpu_clocks", "gpu_power_limit_w", "gpu_ecc", "gpu_mig"):
        assert len(environment[key]) == environment["gpu_count"]
    assert "ddpbench_git_sha" in environment and "allocator_conf" in environment
    # The ranks' rows judge `mfu` against the GPUs a node has (ranks may share them under gloo).
    assert meta["context"]["gpu_count"] == (environment["gpu_count"] if meta["device"] == "cuda" else None)


def test_the_sampler_period_is_in_run_json_once_in_ms(tmp_path):
    meta = new_run_json(tmp_path, "--mem-period-ms", "50")
    assert meta["config"]["mem_period_ms"] == 50.0
    assert all(c["mem_period_ms"] == 50.0 and "mem_period_s" not in c for c in meta["configurations"])
    assert "mem_period_s" not in json.dumps(meta)


def test_the_console_says_the_precision(tmp_path, capsys):
    args = cli.build_parser().parse_args(["bench", "--results", str(tmp_path), "--run-id", "r", "--impls", "naive"])
    _, plan = bench.new_run(args, command=("ddpbench",))
    plan_lines.say_plan(plan, requested_dtype="auto")
    out = capsys.readouterr().out
    dtype = plan.configurations[0].dtype
    expected = "fp32" if dtype == "fp32" else "bf16 autocast (parameters fp32)"
    assert f"ddpbench: precision: {expected} (--dtype auto), TF32 off\n" in out


def test_zero_with_a_stateless_optimizer_is_warned_of_before_it_runs(capsys):
    """A review's run of zero with SGD (the default) held 0 MiB of optimizer state: nothing for it to shard."""
    import types

    sgd = [types.SimpleNamespace(impl=impl, optimizer="sgd") for impl in ("stock", "zero", "fsdp")]
    plan_lines.warn_nothing_to_shard(sgd)
    err = capsys.readouterr().err
    assert "zero shards only the optimizer's state, and --optimizer sgd keeps none" in err and err.count("\n") == 1
    plan_lines.warn_nothing_to_shard(
        [types.SimpleNamespace(impl="zero", optimizer="adam")]
    )  # Adam's moments: its state
    assert capsys.readouterr().err == ""


def test_ddpbench_env_shows_what_a_default_bench_run_records(capsys):
    assert cli.main(["env"]) == 0
    shown = json.loads(capsys.readouterr().out)
    recorded = env.capture(tf32=False)
    for key in (*FLAGS, "cudnn_enabled", "allocator_conf", "gpu_clocks", "gpu_power_limit_w", "gpu_ecc", "gpu_mig"):
        assert shown[key] == recorded[key], key
    assert shown["ddpbench_git_sha"] == recorded["ddpbench_git_sha"] == recorded["git_sha"]


@pytest.mark.parametrize("workload", ["mlp", "torchvision:resnet18"])
def test_on_the_cpu_the_ranks_imports_begin_in_the_environment_the_launches_will_have(tmp_path, workload):
    """A torchvision model's import writes torch's compile-cache folder into this process's environment: the
    launches' environment then differs from the early zygote's by a default, which must not cost a new zygote."""
    from harness.config.ranks import child_environment
    from harness.launch import launcher, zygote

    args = cli.build_parser().parse_args(
        ["bench", "--results", str(tmp_path), "--run-id", "r", "--impls", "naive", "--workloads", workload]
    )
    _, plan = bench.new_run(args, command=("ddpbench",))
    if plan.device != "cpu":
        pytest.skip("a GPU launch starts fresh interpreters: nothing begins early")
    started = zygote._running[launcher.WORKER]
    assert started.alive() and zygote.for_launch(launcher.WORKER, child_environment(plan.threads_per_rank)) is started


def test_a_wrong_guess_of_the_cpu_ends_the_early_zygote(monkeypatch):
    """Without a GPU driver's device file the command guesses the CPU and starts the ranks' imports; where torch
    then finds a GPU after all, those launches start fresh interpreters and the zygote would only hold a core."""
    from harness.commands import collectives
    from harness.config import bench as cfgmod
    from harness.launch import zygote

    monkeypatch.setattr(cfgmod, "likely_cpu", lambda requested: True)
    monkeypatch.setattr(cfgmod, "cuda_available", lambda: True)
    monkeypatch.setattr(cfgmod, "gpu_count", lambda: 2)
    started = []
    real = zygote.for_launch

    def noting(module, env, cuda=False):
        started.append(real(module, env, cuda=cuda))
        return started[-1]

    monkeypatch.setattr(zygote, "for_launch", noting)
    args = cli.build_parser().parse_args(["collectives", "--gpus", "2"])
    config, _ = collectives.collectives_config(args, command=("ddpbench",))
    assert config.device == "cuda" and len(started) == 1
    assert not started[0].alive() and not zygote._running


def test_a_dry_run_starts_no_ranks_imports(monkeypatch, tmp_path):
    """--dry-run launches nothing: a zygote importing torch beside the command's own import only slowed its plan
    (two imports on a loaded machine's cores), to be ended unused."""
    from harness.config import bench as cfgmod
    from harness.launch import zygote

    monkeypatch.setattr(cfgmod, "likely_cpu", lambda requested: True)
    started = []
    monkeypatch.setattr(zygote, "for_launch", lambda module, env, cuda=False: started.append(module))
    args = cli.build_parser().parse_args(["bench", "--results", str(tmp_path), "--impls", "naive", "--dry-run"])
    *_, configurations = bench._planned(args, command=("ddpbench",))
    assert configurations and started == []


def test_the_command_line_starts_benchs_ranks_imports_before_the_commands_own(tmp_path):
    """`ddpbench bench` on the CPU starts its zygote once its flags are parsed, before it imports bench's module, the
    launcher and pandas (1.5-3 s here, which came first before); --dry-run and --resume start none from here."""
    import subprocess
    import sys

    code = f"""
import os, sys
from harness import cli
from harness.config import bench
from harness.launch import zygote
bench.GPU_DEVICE_NODES = ('/no/such/device',)
def noting(self, module, env, cuda=False):
    print(module, *(name in sys.modules for name in ('torch', 'pandas', 'harness.commands.bench')), flush=True)
    os._exit(0)
zygote.Zygote.__init__ = noting
for extra in (['--dry-run'], ['--resume', 'nothing']):
    cli.start_ranks_early(cli.build_parser().parse_args(['bench', *extra]))
cli.main(['bench', '--results', {str(tmp_path)!r}, '--impls', 'naive'])
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["harness.rank.worker", "False", "False", "False"]


def test_bench_reaches_the_ranks_early_start_without_importing_torch(tmp_path):
    """What `bench` and `collectives` run before `start_early` (their command modules, the launcher, the device check
    where no GPU driver's device file exists) imports no torch: the parent's 1.1 s of it would come before the
    ranks' imports. In a fresh interpreter, each command's zygote starts before torch is imported."""
    import subprocess
    import sys

    code = f"""
import sys
import harness.commands.bench, harness.launch.launcher, harness.commands.collectives
from harness import cli
from harness.config import bench
from harness.launch import zygote
bench.GPU_DEVICE_NODES = ('/no/such/device',)
print(bench.likely_cpu('auto'), 'torch' in sys.modules)
real = zygote.Zygote.__init__
def noting(self, module, env, cuda=False):
    print(module, 'torch' in sys.modules)
    real(self, module, env, cuda=cuda)
zygote.Zygote.__init__ = noting
parse = cli.build_parser().parse_args
harness.commands.collectives.collectives_config(parse(['collectives', '--device', 'cpu']), command=())
zygote.close_all()
harness.commands.bench.new_run(parse(['bench', '--results', {str(tmp_path)!r}, '--impls', 'naive']), command=())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [
        "True", "False", "harness.rank.collectives", "False", "harness.rank.worker", "False",
    ]  # fmt: skip
