"""`ddpbench list` and `ddpbench env` print what a user needs to choose and to trust a run."""

from __future__ import annotations

import ast
import json
import shutil
import sys
from pathlib import Path

import pytest
import tomllib
from terminal import Terminal

import impls
import workloads
from harness import cli


def test_list_names_every_strategy_workload_and_cluster_with_a_description(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in impls.names() + workloads.names():
        line = next(line for line in out.splitlines() if line.strip().startswith(name + " "))
        assert len(line.split(None, 1)[1]) > 10
    for name in workloads.names():  # each workload's sizes with their parameter counts
        index = out.splitlines().index(next(line for line in out.splitlines() if line.strip().startswith(name + " ")))
        sizes = out.splitlines()[index + 1]
        assert "tiny " in sizes and "small " in sizes and "full " in sizes
    reference = next(line for line in out.splitlines() if line.strip().startswith(impls.reference_name() + " "))
    assert reference.endswith("[warm-up: 11 steps on cuda]")  # torch DDP's timed forwards (tests/config/test_warmup.py)
    from harness.perfmodel.clusters import cluster

    assert "clusters for `predict --cluster`" in out  # and each built-in cluster profile
    for name in cluster.builtin_names():
        assert f"  {name} " in out
    assert "all-reduce tables: 2 tables, 18 of 18 sizes within 25 %" in out  # dgx-h200's check
    assert "against published nccl-tests all-reduce tables: none found" in out  # dgx1-v100 has none


def test_env_is_json_with_versions_host_and_git(capsys):
    assert cli.main(["env"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["torch_version"] and env["hostname"] and env["cpu_count"] >= 1
    assert "git_sha" in env and "git_dirty" in env
    assert env["libraries"]["pyarrow"]
    assert env["gpu_count"] == len(env["gpus"])


def test_version_names_the_installed_package(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"ddpbench {metadata.version('ddpbench')}\n"


def test_version_without_package_metadata_is_unknown(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert cli.version() == "unknown"


def test_bad_input_is_one_line_on_stderr_and_exit_2(capsys, tmp_path):
    assert cli.main(["compare", "nope-a", "nope-b", "--results", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("ddpbench: error: ") and captured.err.count("\n") == 1


# Below the face (cli.py and harness/commands/) nothing prints to the user's terminal or parses a
# command line. The exceptions are the torchrun ranks' own: their entry points parse the arguments
# the launcher gives them, and a fired fault writes one line to the rank's log file.
# The entry points of the processes a launch starts (the zygote, torchrun's agent, the ranks) read their
# own command line; what they print goes into the launch's log, never to the user's console.
RANK_ENTRY_POINTS = {
    "harness/rank/worker.py", "harness/rank/collectives.py", "harness/launch/agent.py", "harness/launch/zygote.py"
}  # fmt: skip
RANK_LOG_LINES = {"harness/handoff/faults.py", "harness/launch/zygote.py"}


def _below_the_face() -> list[Path]:
    root = Path(__file__).resolve().parents[2] / "harness"
    return [p for p in root.rglob("*.py") if p.name != "cli.py" and "commands" not in p.relative_to(root).parts]


def _calls_and_imports(path: Path) -> tuple[set[str], set[str]]:
    calls, names = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys":
            names.add(f"sys.{node.attr}")
    return calls, names


def test_nothing_below_the_face_prints_or_parses_argv():
    root = Path(__file__).resolve().parents[2]
    checked = _below_the_face()
    assert len(checked) > 20  # the walk found the harness
    for path in checked:
        name = path.relative_to(root).as_posix()
        calls, names = _calls_and_imports(path)
        if name not in RANK_LOG_LINES:
            assert "print" not in calls, f"{name} prints: printing belongs to harness/commands/console.py"
        if name not in RANK_ENTRY_POINTS:
            assert not {"argparse", "sys.argv"} & names, f"{name} reads a command line: that is the face's job"


@pytest.mark.parametrize(
    ("argv", "said"),
    [(["compare", "a", "b", "--treshold", "5%"], "unrecognized arguments --treshold 5%; did you mean --threshold?"),
     (["predict", "--clustr", "dgx-h100"], "unrecognized arguments --clustr dgx-h100; did you mean --cluster?"),
     (["compare", "a", "b", "--bogus"], "unrecognized argument --bogus; compare's flags are --across-strategies, "
      "--help, --memory-threshold, --out, --results, --threshold"),
     (["compare", "a", "b", "c"], "unrecognized argument c; compare's flags are "),
     (["list", "hf:gpt2", "--wopt", "n_layer=24", "n_embd=2048"],  # several KEY=VALUE after one --wopt
      "unrecognized argument n_embd=2048; each KEY=VALUE takes a flag of its own: --wopt n_embd=2048")],
)  # fmt: skip
def test_a_stray_argument_is_one_line_with_the_nearest_flag_or_the_commands_flags(capsys, argv, said):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err == f"ddpbench: error: {said}" + err.split(said, 1)[1]
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["report", "--out", ""], ["compare", "a", "b", "--out="], ["collectives", "--sizes", ""],
     ["collectives", "--results", ""], ["predict", "--nodes", "", "--cluster", "dgx-h100"],
     ["predict", "--workload", "", "--busbw", "10GB/s"]],
)  # fmt: skip
def test_a_flag_given_an_empty_value_is_refused_before_anything_runs(capsys, tmp_path, monkeypatch, argv):
    """An empty path was the working folder (a review's `report --out ''` wrote index.html into the repository),
    an empty list or name the default, silently."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    err = capsys.readouterr().err
    flag = next(a for a in argv if a.startswith("--") and (a.endswith("=") or argv[argv.index(a) + 1] == ""))
    assert (
        stopped.value.code == 2
        and err
        == f"ddpbench: error: {flag.rstrip('=')} is empty; give it a value (see "
        "--help), or leave it out for its default\n"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_parsers_own_refusals_read_as_every_other_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["predict", "--cluster", "dgx-h100", "--sizes", "-1KiB:1MiB"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("ddpbench: error: argument --sizes: ") and err.count("\n") == 1
    assert err.endswith("(see ddpbench predict --help)\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "broken", "broken"],
        ["predict", "--run", "broken", "--busbw", "10GB/s"],
        ["bench", "--resume", "broken"],
    ],
)
def test_a_run_whose_run_json_is_not_json_is_refused_in_one_line(capsys, tmp_path, argv):
    """Once a traceback, and exit 1: compare's 'significantly slower'."""
    run = tmp_path / "broken"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "cpu_run", run)
    (run / "run.json").write_text("{bad")
    assert cli.main([*argv, "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddpbench: error: run 'broken': ") and "is not valid JSON" in err and err.count("\n") == 1


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc: a folder nothing can be made in")
@pytest.mark.parametrize(
    "argv",
    [["collectives", "--results", "/proc/x", "--sizes", "1KiB:4KiB"], ["report", "--out", "/proc/x"],
     ["predict", "--cluster", "dgx-h100", "--nodes", "1", "--sizes", "1MiB", "--out", "/proc/x.csv"]],
)  # fmt: skip
def test_an_output_where_nothing_can_be_made_is_refused_before_anything_runs(capsys, argv, no_early_ranks):
    """Root passes the permission bits' check everywhere; /proc (or a read-only mount) then failed on the first
    write, with a traceback."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddpbench: error: ") and "'/proc" in err and err.count("\n") == 1


def test_list_says_one_strategy_workload_spec_or_cluster_in_full(tmp_path, capsys):
    """`list NAME`: what a user needs before a run, for the model and the cluster they mean."""
    from harness.perfmodel.clusters import cluster

    assert cli.main(["list", "stock", "gpt2", "hf:gpt2", "dgx-h200"]) == 0
    out = capsys.readouterr().out
    assert "--opt bucket_cap_mb=unset (MiB > 0): Bucket cap of DDP in MiB" in out  # each option, its doc and range
    assert "  full    124.4M parameters, 474.7 MiB of fp32 gradients a step (DDP all-reduces them all)" in out
    # which model full is, as gpt2's description says GPT-2 124M (hf:t5's never said it was t5-small)
    assert (
        "workload hf:gpt2: full is transformers' default GPT2Config, like openai-community/gpt2 (its docs say)\n" in out
    )
    assert "--wopt: its configuration's fields" in out
    profile = out[out.index("# DGX H200") :].split("\n# against")[0] + "\n"
    read_back = cluster.from_mapping(tomllib.loads(profile), where=str(cluster.BUILTIN_FOLDER / "dgx-h200.toml"))
    assert read_back == cluster.load("dgx-h200")  # the file as shipped: one to copy and edit
    assert "#   1 node: 1 table, 14 of 14 sizes within 25 %" in out
    mine = tmp_path / "mine.toml"  # a user's own file reads back; its unsourced numbers are named
    mine.write_text(profile.replace('name = "dgx-h200"', 'name = "mine"').split("[sources]")[0])
    assert cli.main(["list", str(mine)]) == 0
    out = capsys.readouterr().out
    assert 'name = "mine"' in out and "# no source given for: gpus_per_node, generation, cpu" in out
    assert "checked for built-in profiles only" in out


def test_list_says_each_options_choices_and_bench_help_points_there(capsys):
    """`list stock` printed '--opt comm_hook=none: Gradient compression hook …' with no value to type; that
    PowerSGD needs NCCL only a dry run revealed."""
    assert cli.main(["list", "stock"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "--opt comm_hook=" in x)
    assert line.startswith("  --opt comm_hook=none (one of none, fp16, bf16, powersgd): ") and "NCCL only" in line
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "`ddpbench list IMPL`" in said and "repeated --opt flags combine every value with every other" in said


def test_list_says_each_sizes_input_beside_its_parameters(capsys):
    """What a size costs: vit_l_16's 303M parameters at every size once hid that tiny's input was 224×224."""
    assert cli.main(["list", "torchvision:vit_l_16"]) == 0
    out = capsys.readouterr().out
    assert "  tiny    303.1M parameters, 32×32 input, 1.1 GiB" in out and "  full    304.3M parameters, 224×224 " in out
    assert cli.main(["list", "hf:t5", "--wopt", "seq_len=48"]) == 0
    assert "  tiny    197.5k parameters, sequence 48 (source and target), " in capsys.readouterr().out


def test_list_says_where_the_full_sizes_sequence_is_shorter_than_the_configurations_positions(capsys, tmp_path):
    """A walkthrough's config.json of 2,048 positions listed 'full … sequence 1024' without saying why, and its user
    trained at 2,048: full's sequence stops at 1024 (a model's positions are the longest it takes, not the one it
    trains at), and list says the positions and the option that sets the sequence. (Wider than tiny's: three sizes.)"""
    import json

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 128, "num_hidden_layers": 1,
                                  "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 256,
                                  "max_position_embeddings": 2048}))  # fmt: skip
    assert cli.main(["list", f"hf:{config}"]) == 0
    out = capsys.readouterr().out
    assert " parameters, sequence 1024 (not its max_position_embeddings, 2048: --wopt seq_len=N sets it), " in out
    assert " parameters, sequence 32, " in out  # tiny's is its own
    assert cli.main(["list", f"hf:{config}", "--wopt", "seq_len=2048"]) == 0
    out = capsys.readouterr().out
    assert out.count(" parameters, sequence 2048, ") == 3 and "max_position_embeddings" not in out


def test_list_says_where_the_checkpoint_full_is_like_names_a_size_its_defaults_do_not_count():
    """`list hf:qwen2` said "like Qwen/Qwen2-7B (its docs say)" beside a counted 12.0B (transformers' default
    Qwen2Config has 32 key/value heads, the checkpoint 4): the count is what ddpbench builds, and it says so."""
    from types import SimpleNamespace

    from harness.commands import info

    qwen2 = "full is transformers' default Qwen2Config, like Qwen/Qwen2-7B (its docs say)"
    assert info._unlike_its_name(qwen2, SimpleNamespace(parameters=12.0e9)) == (
        ", though its defaults count 12.0B, not 7B"
    )
    llama = "full is transformers' default LlamaConfig, like meta-llama/Llama-2-7b-hf (its docs say)"
    assert info._unlike_its_name(llama, SimpleNamespace(parameters=6.74e9)) == ""  # within a quarter of 7B
    assert info._unlike_its_name("like bigcode/santacoder-350m (its docs say)", SimpleNamespace(parameters=1e9))
    assert info._unlike_its_name("like google-t5/t5-small (its docs say)", SimpleNamespace(parameters=6e7)) == ""


@pytest.mark.parametrize(
    "name, named",
    [("bogus", "name a strategy (bucketed"), ("nope.toml", "ddpbench list 'nope.toml': no such file; give")],
)
def test_list_of_an_unknown_name_is_one_line_and_exit_2(capsys, name, named):
    assert cli.main(["list", "stock", name]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and named in err  # nothing said of the good name before the bad one


def test_list_counts_the_model_a_user_will_train_with_its_options(capsys, monkeypatch):
    """A 1.3B Llama is hf:llama with five fields changed: list counts it so, and names the bench that would run it:
    on a CPU, even one that holds its state (1 TiB here), a smaller size's (its full size's steps take days there:
    a user's 350M file was told to bench it, and its dry run said 217 h), with predict counting the one named."""
    import torch

    from harness.commands.console import plan

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(plan, "available_bytes", lambda: 2**40)
    wopts = ["--wopt", "hidden_size=2048", "--wopt", "num_hidden_layers=24", "--wopt", "num_attention_heads=16",
             "--wopt", "intermediate_size=5504"]  # fmt: skip
    assert cli.main(["list", "hf:llama", "dgx-h100", *wopts]) == 0  # a cluster beside it takes none of them
    out = capsys.readouterr().out
    full = next(line for line in out.splitlines() if line.strip().startswith("full "))
    assert full.split()[1] == "1.3B" and "5.0 GiB of fp32 gradients a step" in full
    assert (
        "at full, 1.3B parameters, more than the 20.0M a CPU steps through briefly (bench --dry-run says how long)"
        in out
    )
    # its widths halved together, its own key/value heads too, which predict then restores (as it counts them)
    assert "bench --workloads hf:llama --size small --wopt hidden_size=256 --wopt num_hidden_layers=3 --wopt " \
           "num_attention_heads=2 --wopt intermediate_size=688 --wopt num_key_value_heads=2 --wopt vocab_size=32000 " \
           "--batch-size 2" in out  # fmt: skip
    assert "predict --run RUN --cluster dgx-h100 --train-wopt hidden_size=2048 --train-wopt num_hidden_layers=24 " \
           "--train-wopt num_attention_heads=16 --train-wopt intermediate_size=5504 " \
           "--train-wopt num_key_value_heads=16 --train-wopt seq_len=N" in out  # fmt: skip


def test_list_says_a_model_its_options_fix_at_every_size_once(capsys):
    """A 1.3B Llama given its five shape fields read 'tiny 1.3B parameters, sequence 32', 'small 1.3B …', 'full 1.3B
    …': one model under three names. It is said once, with what --size still changes (the sequence)."""
    fields = ("hidden_size=64", "num_hidden_layers=2", "num_attention_heads=2", "num_key_value_heads=2",
              "vocab_size=1000", "intermediate_size=96")  # fmt: skip
    shape = [part for field in fields for part in ("--wopt", field)]
    every = "   198.0k parameters at every --size (the --wopt given fix its shape)"
    assert cli.main(["list", "hf:llama", *shape]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[1] == f"{every}, 773.2 KiB of fp32 gradients a step (DDP all-reduces them all)"
    assert said[2].startswith(
        "  --size sets its input alone: tiny sequence 32, small sequence 128, full sequence 1024 ("
    )
    assert cli.main(["list", "hf:llama", *shape, "--wopt", "seq_len=64"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[1].startswith(f"{every}, sequence 64, 773.2 KiB ") and said[2].startswith("  --wopt: ")
    assert cli.main(["list", "hf:llama", *shape[:-2]]) == 0  # tiny's own intermediate size: a model of its own
    assert capsys.readouterr().out.splitlines()[1].startswith("  tiny ")


def test_list_says_on_a_terminal_what_its_silence_before_a_spec_is(capsys, monkeypatch):
    """`list hf:llama` with a 1.3B Llama's options said nothing for 22 to 27 s (importing torch and transformers,
    counting on the meta device): a terminal is told so until the first line, which wipes it."""

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["list", "examples/my_workload.py:MyModel"]) == 0
    assert terminal.getvalue() == (
        "\r\033[Kddpbench list: importing torch to check examples/my_workload.py:MyModel…\r\033[Kddpbench list: "
        "counting examples/my_workload.py:MyModel on the meta device…\r\033[K"
    )
    assert capsys.readouterr().out.startswith("workload examples/my_workload.py:MyModel\n")
    terminal.seek(0), terminal.truncate()
    assert cli.main(["list", "stock", "dgx-h100"]) == 0  # no model counted: nothing
    assert terminal.getvalue() == ""


def test_list_says_a_model_no_cpu_rank_can_hold_before_its_parameter_count(capsys, monkeypatch):
    """A 40B file on a CPU was told only that it has more than the 20M parameters list benches there, never that
    no rank could hold it: memory is judged first."""
    import torch

    from harness.commands.console import plan

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(plan, "available_bytes", lambda: 2**34)  # 16 GiB
    assert cli.main(["list", "examples/my_workload.py:MyModel", "--wopt", "width=100000"]) == 0
    out = capsys.readouterr().out
    assert (
        "counted on the meta device; a DDP rank holds about 447.1 GiB of parameters, gradients, DDP's buckets and "
        "activations at batch 8, fp32, SGD (bench's defaults): " in out
    )  # what it assumes, said: AdamW's is more
    # the ranks' sum (rounded apart) against the memory: "a rank … 10.3 GiB, more than the 18.4 GiB … for 2 ranks"
    assert "2 ranks × 447.1 GiB = 894.1 GiB, more than the 16.0 GiB this machine has available: bench it smaller" in out
    assert "a CPU steps through briefly" not in out


@pytest.mark.parametrize("args, named", [
    (["dgx-h100", "--wopt", "a=1"], "--wopt needs a workload NAME"),
    (["hf:llama", "--wopt", "hidden_sise=3"], "no configuration field hidden_sise (did you mean hidden_size?)"),
    (["hf:llama", "--wopt", "seq_len=1,2"], "--wopt seq_len=1,2: list counts one model; give one value"),
])  # fmt: skip
def test_list_with_a_bad_workload_option_is_one_line_and_exit_2(capsys, monkeypatch, args, named):
    """`list hf:gpt2 --wopt n_layer=abc` said what it waited for, then its refusal, 9 s in: off a terminal nothing is
    said before the options are checked, however long the check (torch's and transformers' imports) takes."""
    import time

    import workloads
    from harness.commands.console import progress

    parse = workloads.parse_options
    monkeypatch.setattr(progress, "QUIET_S", 0.01)  # the silence's line comes at once, if at all
    monkeypatch.setattr(workloads, "parse_options", lambda *a, **k: time.sleep(0.3) or parse(*a, **k))
    assert cli.main(["list", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and named in err


FROZEN = """
import torch
from torch import nn


class Frozen:
    def build_model(self):
        backbone = nn.Linear(1024, 1024)  # 1,049,600 parameters, none trained
        backbone.requires_grad_(False)
        return nn.Sequential(backbone, nn.Linear(1024, 10))  # 10,250 trained

    def make_batch(self, batch_size, *, device, generator):
        return torch.randn(batch_size, 1024, device=device, generator=generator)

    def loss(self, model, batch):
        return model(batch).sum()
"""


def test_list_counts_the_gradients_of_the_parameters_that_train_alone(tmp_path, capsys):
    """A model with a frozen backbone (a fine-tune) read '4.0 MiB of fp32 gradients a step (DDP all-reduces them
    all)': every parameter's 4 bytes, where DDP all-reduces the 10,250 trained ones' 40 KiB alone."""
    (tmp_path / "frozen.py").write_text(FROZEN)
    assert cli.main(["list", f"{tmp_path / 'frozen.py'}:Frozen"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[1] == "     1.1M parameters, 40.0 KiB of fp32 gradients a step (10.2k trained: DDP all-reduces theirs)"
    assert said[2].startswith("  --wopt")  # one line: a file of yours is built as written, whatever --size


ADAM = ", with --optimizer adam or adamw where you train with it (predict counts the run's optimizer)"
"""list's bench command for a model too large here: an Adam user copying it got SGD's memory."""


def test_list_says_to_bench_smaller_a_model_whose_state_outgrows_this_machine(capsys, monkeypatch):
    """A user's 7B file was listed with 'bench it: … --size full' on a 23 GiB CPU machine (208 GiB of Adam state for
    bench's 2 ranks): beyond what this machine holds, list gives the bench command that fits, and the predict that
    counts the one named from its run."""
    import torch

    from harness.commands.console import plan
    from harness.commands.console.invoked import ddpbench_command

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mine, program = "examples/my_workload.py:MyModel", ddpbench_command()
    assert cli.main(["list", mine, "--wopt", "width=512"]) == 0  # 1.1M parameters: 12.2 MiB a DDP rank, fits here
    assert f"bench it: {program} bench --workloads {mine} --wopt width=512\n" in capsys.readouterr().out  # no --size
    monkeypatch.setattr(plan, "available_bytes", lambda: 4 * 2**20)  # a 4 MiB machine, as bench judges it
    assert cli.main(["list", mine, "--wopt", "width=512"]) == 0
    out = capsys.readouterr().out
    assert "bench it: ddpbench" not in out
    assert out.endswith(
        "  counted on the meta device; a DDP rank holds about 12.2 MiB of parameters, gradients, DDP's buckets and "
        "activations at batch 8, fp32, SGD (bench's defaults): 2 ranks × 12.2 MiB = 24.3 MiB, more than the 4.0 MiB "
        "this machine has available: "
        f"bench it smaller (67.3k parameters): {program} bench --workloads "
        f"{mine} --wopt width=128 --batch-size 8{ADAM}\n"  # its width halved until it fits (a file of yours: no --size)
        f"  then {program} predict --run RUN --cluster dgx-h100 --train-wopt width=512 predicts the model you train "
        "from that run (docs/your-model.md)\n"
    )
    assert cli.main(["list", mine]) == 0  # no option to halve: how, in words
    assert "available: bench it smaller with --wopt, then give these options to predict --train-wopt KEY=VALUE (" in (
        capsys.readouterr().out
    )
    assert cli.main(["list", "gpt2"]) == 0  # a registered one: --size scales it, to the largest that fits
    assert (
        f"bench it smaller (34.2k parameters): {program} bench --workloads gpt2 --size tiny --batch-size 4{ADAM}\n"
        in (capsys.readouterr().out)
    )


def test_list_gives_a_config_too_large_here_the_bench_at_a_size_that_fits_and_the_sequence_to_predict(
    capsys, monkeypatch, tmp_path
):
    """A walkthrough's 1.1B config.json was told "bench it at --size small", with no command: its user benched it at
    the sequence they train at, 2048, and a configuration ran 12 minutes unfinished. The command benches small at
    its own batch and sequence; the options given to list (a longer sequence, a wider model) go to predict."""
    import torch

    from harness.commands.console import plan
    from harness.commands.console.invoked import ddpbench_command

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(plan, "available_bytes", lambda: 2**30)  # 1 GiB
    config, program = tmp_path / "config.json", ddpbench_command()
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
                                  "num_attention_heads": 8, "intermediate_size": 1408, "vocab_size": 32000,
                                  "max_position_embeddings": 2048}))  # fmt: skip
    bench = f"bench it smaller (6.3M parameters, sequence 128): {program} bench --workloads hf:{config} --size small "
    assert cli.main(["list", f"hf:{config}"]) == 0
    out = capsys.readouterr().out
    assert (
        f"{bench}--batch-size 2{ADAM}\n  then {program} predict --run RUN --cluster dgx-h100 --train-wopt seq_len=N "
        in out
    )
    assert out.endswith("predicts the model you train, at the sequence N you train at, from that run "
                        "(docs/your-model.md)\n")  # fmt: skip
    assert cli.main(["list", f"hf:{config}", "--wopt", "seq_len=2048", "--wopt", "task=causal_lm"]) == 0
    assert (
        f"{bench}--wopt task=causal_lm --batch-size 2{ADAM}\n  then {program} predict --run RUN --cluster dgx-h100 "
        "--train-wopt seq_len=2048 predicts the model you train from that run (docs/your-model.md)\n"
    ) in capsys.readouterr().out


def test_list_says_widths_given_override_the_sizes_and_benches_them_smaller_in_their_shape(capsys, monkeypatch):
    """An LLM user's 1.3B widths (hf:gpt2 --wopt n_layer=24 --wopt n_embd=2048 --wopt n_head=16) read 1.2B at tiny
    and small, and list's bench it smaller was gpt2's own small (4.2M, vocabulary 4,096): the widths given halved
    together, at the model's vocabulary, then predict --train-wopt counting the widths given."""
    import torch

    from harness.commands.console.invoked import ddpbench_command
    from harness.commands.fits_here import shape_kept

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    program, wopts = ddpbench_command(), ["--wopt", "n_layer=8", "--wopt", "n_embd=512", "--wopt", "n_head=8"]
    assert cli.main(["list", "hf:gpt2", *wopts]) == 0  # 51.5M: beyond the parameters list benches on a CPU
    out = capsys.readouterr().out
    assert "  --wopt n_layer, n_embd, n_head override --size's widths: every size has them as given, --size scaling " \
           "only the rest (vocabulary, sequence): no size is a smaller model\n" in out  # fmt: skip
    assert (
        "bench it smaller (16.1M parameters, sequence 128; its widths ÷2, its shape kept: layers to heads, a head's "
        f"width, its vocabulary): {program} bench --workloads hf:gpt2 --size small --wopt n_layer=4 --wopt n_embd=256 "
        f"--wopt n_head=4 --wopt vocab_size=50257 --batch-size 2{ADAM}\n  then {program} predict --run RUN --cluster "
        "dgx-h100 --train-wopt n_layer=8 --train-wopt n_embd=512 --train-wopt n_head=8 --train-wopt seq_len=N " in out
    )
    assert cli.main(["list", "hf:gpt2", "--wopt", "seq_len=64"]) == 0  # no width given: --size scales them
    assert "override --size's widths" not in capsys.readouterr().out
    assert shape_kept("hf:gpt2", {"n_layer": 3, "n_embd": 2048, "n_head": 16}) is None  # 3 layers: no half of 3


def test_the_model_sizes_the_docs_quote_are_what_list_counts():
    """docs/your-model.md called `list hf:llama --wopt hidden_size=2048 --wopt num_hidden_layers=24` a 1.3B Llama;
    list counts 2.2B (intermediate_size stays llama's 11008): every such example is read through list's count."""
    import re

    from harness.commands.fits_here import human_count, parameter_count

    docs = Path(__file__).resolve().parents[2] / "docs"
    quoted = re.compile(r"`ddpbench list\s+(\S+)((?:\s+--wopt\s+\S+)*)` is an? ([0-9.]+[kMB]) ")
    examples = [m.groups() for doc in docs.rglob("*.md") for m in quoted.finditer(doc.read_text())]
    assert examples  # the pattern still finds the docs' examples
    for spec, wopts, size in examples:
        options = dict(pair.split("=") for pair in wopts.split("--wopt") if pair.strip())
        options = {key.strip(): int(value) for key, value in options.items()}
        assert human_count(parameter_count(spec, "full", options)) == size, (spec, wopts)


def test_list_gives_a_zoo_image_model_too_large_at_every_size_a_runnable_tiny_bench(capsys, monkeypatch):
    """`list torchvision:vit_b_16` (85.7M parameters at every size) ended "bench it smaller at --size tiny with
    --wopt (its fields)": no command, and the fields it pointed to (num_layers) its builder fixes. --size sets its
    input alone: said, the tiny bench given as a command, and the registered `vit` (smaller widths) named."""
    import torch

    from harness.commands.console.invoked import ddpbench_command

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    program = ddpbench_command()
    assert cli.main(["list", "torchvision:vit_b_16"]) == 0
    out = capsys.readouterr().out
    assert "(its fields)" not in out
    assert (
        "\n  --wopt: image_size, num_classes and its builder's attention_dropout, dropout, representation_size (" in out
    )
    assert "the architecture is whole at every size; tiny's 85.7M parameters, 32×32 input): " in out
    assert f"{program} bench --workloads torchvision:vit_b_16 --size tiny --batch-size 2 (or the registered vit" in out
    assert f"{program} list vit), with --optimizer adam or adamw where you train with it" in out
    assert f"optimizer)\n  then {program} predict --run RUN --cluster dgx-h100 predicts" in out


def test_a_clusters_table_its_refusals_and_its_profile_import_neither_torch_nor_scipy(tmp_path):
    """A collectives table is arithmetic on a cluster's profile, yet `predict` imported torch (2.7 s of its 5 s here)
    before it, and before refusing a bad --cluster or a missing --run; `list dgx-h100` imported every strategy
    (torch) to learn the name was none of theirs."""
    import subprocess

    missing = str(tmp_path / "no-such-run")
    commands = [
        ["predict", "--cluster", "dgx-h100", "--nodes", "1,2", "--collective", "all_reduce", "--sizes", "1MiB:16MiB"],
        ["predict", "--cluster", "dgx-nosuch", "--nodes", "1,2"],
        ["predict", "--run", missing, "--cluster", "dgx-h100", "--results", str(tmp_path)],
        ["list", "dgx-h100"],
    ]
    code = (
        f"import sys; from harness import cli; codes = [cli.main(c) for c in {commands!r}]; "
        "print(codes, [m for m in ('torch', 'scipy') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[0, 2, 2, 0] []"
    assert "--cluster 'dgx-nosuch' is neither" in done.stderr and f"--run {missing!r} is not" in done.stderr


def test_a_file_of_yours_is_benched_smaller_by_its_widths_and_depth_never_its_counts_of_experts_or_heads(monkeypatch):
    """A 300M MoE file's 'bench it smaller' halved n_experts 8 to 2 and heads 16 to 4: a model whose idle experts
    were gone, another kind than the one to train. Its widths and depth halve; its counts of parallel parts stay."""
    from harness.commands import fits_here

    monkeypatch.setattr(
        fits_here, "parameter_count", lambda name, size, options: options["d_model"] * options["layers"]
    )
    monkeypatch.setattr(fits_here, "_short", lambda name, size, options: options["d_model"] <= 256)
    given = {"d_model": 1024, "layers": 16, "head_dim": 64, "n_experts": 8, "heads": 16, "num_attention_heads": 16,
             "top_k": 2, "num_experts_per_tok": 2, "n_groups": 4, "bias": True, "act": "gelu"}  # fmt: skip
    halved = fits_here._halved_to_fit("mine.py:MoE", given)
    widths = {"d_model": 256, "layers": 4, "head_dim": 16}
    assert halved == {**given, **widths}
