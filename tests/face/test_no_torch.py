"""The commands that build no model import no torch: its import is 2 to 12 s of a CI job's or a notebook's wait
for `compare` and `list STRATEGY` (which once imported it through the strategies' registry), `predict`'s
collectives table, a cluster's profile and --help; nor do `predict --run` over the run's stored profile and `report`
where the user's cache holds the model's counts. Each runs in a fresh interpreter, which says at its end whether
torch came in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"

PROBE = """
import sys
from harness import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as leaving:
    code = leaving.code
print("exit", code, "torch imported:", "torch" in sys.modules, file=sys.stderr)
"""

COMMANDS = {  # each with the exit code it ends with: one that errors before it would import torch fails here
    "help": (["--help"], "0"),
    "list a cluster": (["list", "dgx-h100"], "0"),
    "list a strategy": (["list", "stock"], "0"),
    "compare": (["compare", "runs/cpu_run", "runs/bucket_sweep"], "3"),  # one repeat a side: cannot tell, exit 3
    "predict's collectives": (["predict", "--cluster", "dgx-h100", "--nodes", "1,2", "--collective", "all_reduce",
                               "--sizes", "1MiB:1GiB"], "0"),
}  # fmt: skip


@pytest.mark.parametrize(("command", "code"), COMMANDS.values(), ids=COMMANDS.keys())
def test_a_command_that_builds_no_model_imports_no_torch(command, code, tmp_path):
    for run in ("cpu_run", "bucket_sweep"):  # compare writes its verdicts into NEW's folder: copies, not the fixtures
        shutil.copytree(DATA / run, tmp_path / "runs" / run)
    done = subprocess.run([sys.executable, "-c", PROBE, *command], cwd=tmp_path, capture_output=True, text=True)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"exit {code} "), done.stdout + done.stderr
    assert last.endswith("torch imported: False"), done.stderr


COUNTED = {  # each reads its model's counts from the user's cache (harness.measure.meta_counts)
    "report": ["report", "--results", "runs", "--out", "site"],
    "predict over a stored profile": ["predict", "--run", "runs/cpu_run", "--busbw", "90GB/s", "--latency", "30us"],
}


def test_commands_over_a_runs_stored_profile_import_no_torch(tmp_path, monkeypatch):
    """`report`'s what-if page and `predict --run` (DDP's bucket layout in pure Python, the device asked of torch only
    to measure a profile): torch comes in only to count a model the cache lacks, which this process's `report`
    counts first (every count `predict` reads too), as a user's earlier command did."""
    from harness import cli

    shutil.copytree(DATA / "cpu_run", tmp_path / "runs" / "cpu_run")
    monkeypatch.chdir(tmp_path)
    assert cli.main(COUNTED["report"]) == 0
    for name, command in COUNTED.items():
        done = subprocess.run([sys.executable, "-c", PROBE, *command], cwd=tmp_path, capture_output=True, text=True)
        last = done.stderr.strip().splitlines()[-1]
        assert last == "exit 0 torch imported: False", (name, done.stdout + done.stderr)


NO_DRIVER = """
from harness.config import bench
bench.GPU_DEVICE_NODES = ('/no/such/device',)  # a GPU machine's answer is its GPU's memory: torch's to give
"""


def test_list_of_a_counted_workload_and_a_refused_predict_import_no_torch(tmp_path, monkeypatch):
    """Where no GPU driver is here, `list mlp` and `list gpt2` over the user's cached counts (their sizes' counts and
    whether a rank at full fits, which asked torch for a GPU) and `predict --run` refusing a GPU run that stored no
    profile (which asked torch for this machine's device) import neither torch nor transformers."""
    from harness import cli

    shutil.copytree(DATA / "gpu_memory", tmp_path / "runs" / "gpu_memory")
    monkeypatch.chdir(tmp_path)
    commands = {("list", "mlp"): 0, ("list", "gpt2"): 0,
                ("predict", "--run", "runs/gpu_memory", "--busbw", "90GB/s", "--latency", "30us"): 2}  # fmt: skip
    for command in list(commands)[:2]:  # counted first, as a user's earlier command did
        assert cli.main(list(command)) == 0
    bare = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no nvidia-modprobe to load a driver
    for command, code in commands.items():
        done = subprocess.run([sys.executable, "-c", NO_DRIVER + PROBE + TRANSFORMERS, *command], cwd=tmp_path,
                              capture_output=True, text=True, env=bare)  # fmt: skip
        said = done.stderr.strip().splitlines()[-2:]
        assert said == [f"exit {code} torch imported: False", "transformers imported: False"], done.stderr


TRANSFORMERS = """
print("transformers imported:", "transformers" in sys.modules, file=sys.stderr)
"""


def test_cuda_here_asks_torch_only_where_a_gpu_driver_may_be(tmp_path, monkeypatch):
    from harness.config import bench

    monkeypatch.setattr(bench, "cuda_available", lambda: "torch asked")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(bench, "GPU_DEVICE_NODES", (str(tmp_path / "nvidiactl"),))
    assert bench.cuda_here() is False
    (tmp_path / "nvidiactl").touch()
    assert bench.cuda_here() == "torch asked"
    (tmp_path / "nvidiactl").unlink()
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/nvidia-modprobe" if name == "nvidia-modprobe" else None)
    assert bench.cuda_here() == "torch asked"


def test_a_lazy_module_becomes_the_module_itself_at_its_first_use():
    """After the first use the plug-in's name is torch itself: a step's hot path pays no stand-in's lookup, and a test
    that patches torch.distributed's functions reaches the plug-in's calls."""
    from harness.registry import LazyModule, lazy_module

    namespace: dict = {}
    exec("import json\nfrom harness.registry import lazy_module\nloader = lazy_module('json')", namespace)
    assert isinstance(namespace["loader"], LazyModule)
    assert namespace["loader"].dumps([1]) == "[1]"
    assert namespace["loader"] is namespace["json"]
    assert lazy_module("json").__name__ == "json"


def test_every_plugins_entry_and_options_are_read_without_torch():
    """What `list` reads of each strategy and workload before its cached counts: a plug-in that imports torch at its
    top (or subclasses a torch module there) brings it back into every command that lists or names one."""
    code = (
        "import sys, impls, workloads\n"
        "for registry in (impls.REGISTRY, workloads.REGISTRY):\n"
        "    for entry in registry.entries():\n"
        "        entry.options()\n"
        "print(len(impls.names()), len(workloads.names()), 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    strategies, models, torch_imported = done.stdout.split()
    assert int(strategies) > 5 and int(models) > 5 and torch_imported == "False", done.stdout


def test_no_grad_refuses_a_generator_whose_body_it_would_not_cover():
    """Calling a generator function only makes the generator: grad mode would be back on before its body ran."""
    from harness.protocols import no_grad

    def steps():
        yield 1

    with pytest.raises(TypeError, match=r"@no_grad does not cover a generator's body \(.*steps\)"):
        no_grad(steps)
    assert no_grad(lambda: 2)() == 2
