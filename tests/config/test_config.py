"""Bad input: one line on stderr naming the value and the choices, exit code 2, nothing written."""

from __future__ import annotations

import sys

import pytest
import torch

from harness import cli
from harness.commands import arguments
from harness.config.bench import BenchConfig, ConfigError, rank_ladder
from harness.config.grid import decides_anything, expand, rotated
from harness.launch import torchrun


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """The command refused here: none launches, so the ranks' early imports (a zygote importing torch, killed at the
    test's end, tests/bad_input.py) are not begun."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torchrun, "start_early", lambda *_, **__: None)
        try:
            code = cli.main(list(args))
        except SystemExit as exit_:
            code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


BAD_BENCH_ARGS = [
    (["--gpus", "0"], "--gpus 0"),
    (["--gpus", "-2"], "--gpus -2"),
    (["--gpus", "two"], "'two'"),
    (["--impls", "nonesuch"], "'nonesuch'"),
    (["--workloads", "nonesuch"], "'nonesuch'"),
    (["--bucket-cap-mb", "0"], "--bucket-cap-mb '0' is not valid; give a finite number (MiB > 0)"),  # as typed
    (["--bucket-cap-mb", "-5"], "--bucket-cap-mb '-5' is not valid; give a finite number (MiB > 0)"),
    (["--bucket-cap-mb", "lots"], "--bucket-cap-mb 'lots' is not valid; give a finite number (MiB > 0)"),
    (["--opt", "nonesuch=1"], "'nonesuch'"),
    (["--opt", "comm_hook=zip"], "--opt comm_hook=zip is not valid; give one of none, fp16, bf16, powersgd"),
    # as typed, in --bucket-cap-mb's template: it read "bucket_cap_mb: '-1' is not a finite number (MiB > 0, or
    # unset)", naming neither the flag nor the form typed, and a form --opt cannot give
    (["--opt", "bucket_cap_mb=-1"], "--opt bucket_cap_mb=-1 is not valid; give a finite number (MiB > 0)"),
    (["--opt", "bucket_cap_mb=5,inf"], "--opt bucket_cap_mb=inf is not valid; give a finite number (MiB > 0)"),
    (
        ["--opt", "powersgd_rank=4"],
        "powersgd_rank would change nothing: stock's powersgd_rank applies only with comm_hook=powersgd",
    ),  # once run as plain stock, and read as a rival to it
    (["--steps", "0"], "--steps 0"),
    (["--warmup", "-1"], "--warmup -1"),
    (["--batch-size", "0"], "--batch-size 0"),
    (["--size", "huge"], "'huge'"),
    (["--dtype", "fp8"], "'fp8'"),
    (["--dtype", "fp16", "--impls", "rpc_hybrid"], "--dtype fp16 is refused with rpc_hybrid: its remote part's"),
    (["--device", "tpu"], "'tpu'"),
    (["--backend", "mpi"], "'mpi'"),
    (["--backend", "nccl", "--device", "cpu"], "--backend nccl"),
    pytest.param(
        ["--device", "cuda"], "--device cuda", marks=pytest.mark.skipif(torch.cuda.is_available(), reason="has a GPU")
    ),
    (["--run-id", "a/b"], "'a/b'"),
    (["--run-id", "x..y"], "'x..y'"),
    (["--nnodes", "2"], "--rdzv-endpoint"),
    (["--nnodes", "2", "--rdzv-endpoint", "h:1"], "--run-id"),
    (["--rdzv-endpoint", "h:1"], "--rdzv-endpoint h:1 is for several nodes; give --nnodes N"),
    (["--node-rank", "5"], "--node-rank 5 is not valid with --nnodes 1; give 0 (one node)"),  # once 'give 0 to 0'
    (["--timeout", "0"], "--timeout '0' is not valid; give a positive time"),
    (["--timeout", "soon"], "'soon'"),
]


@pytest.mark.parametrize(("args", "named"), BAD_BENCH_ARGS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_bench_value_is_one_line_exit_2_and_writes_nothing(capsys, tmp_path, args, named):
    results = tmp_path / "results"
    code, _out, err = run_cli(capsys, "bench", "--results", str(results), *args)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert named in err
    assert not results.exists()


@pytest.mark.parametrize("cap", ["0", "-1", "abc", "nan", "inf"])
def test_bad_cap_is_refused_before_the_strategies_are_imported(capsys, tmp_path, monkeypatch, cap):
    """A bad --bucket-cap-mb was refused only once the strategies (and torch: 10 s and more) had been imported, a
    bad --budget in half a second; the words stay those of the strategies' own option, which still checks a good cap."""
    import impls

    typed = f"--bucket-cap-mb {cap!r}"
    with pytest.raises(ConfigError) as own:
        impls.entry("stock").options()["bucket_cap_mb"].coerce(cap, typed=typed)
    monkeypatch.setitem(sys.modules, "impls", None)  # importing it now raises ImportError
    code, _out, err = run_cli(capsys, "bench", "--results", str(tmp_path / "r"), "--bucket-cap-mb", f"5,{cap}")
    assert (code, err) == (2, f"ddpbench: error: {own.value}\n")


def test_unknown_strategy_error_lists_the_valid_choices(capsys, tmp_path):
    _, _, err = run_cli(capsys, "bench", "--results", str(tmp_path / "r"), "--impls", "nonesuch")
    assert "choose one of" in err and "stock" in err and "naive" in err


def test_unknown_option_error_lists_the_valid_options(capsys, tmp_path):
    _, _, err = run_cli(capsys, "bench", "--results", str(tmp_path / "r"), "--opt", "nonesuch=1")
    assert "bucket_cap_mb" in err and "static_graph" in err


def test_existing_run_id_is_refused_and_left_alone(capsys, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    code, _, err = run_cli(capsys, "bench", "--results", str(tmp_path), "--run-id", "taken")
    assert code == 2 and "'taken' already exists" in err
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]


def test_results_folder_that_cannot_be_written_is_refused(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, _, err = run_cli(capsys, "bench", "--results", str(blocker / "results"))
    assert code == 2 and "cannot be written" in err


def test_a_results_folder_the_system_refuses_to_make_is_one_line_not_a_traceback(capsys, monkeypatch, tmp_path):
    """What the up-front check cannot see (/proc, a read-only mount) fails the folder's mkdir itself."""
    from pathlib import Path

    def refuse(self, *args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(Path, "mkdir", refuse)
    code, out, err = run_cli(capsys, "bench", "--results", str(tmp_path / "r"), "--size", "tiny", "--repeats", "1")
    assert code == 2 and out == ""
    assert err == f"ddpbench: error: --results {str(tmp_path / 'r')!r} cannot be written: Read-only file system\n"


def test_bad_report_flag_is_one_line(capsys):
    code, _, err = run_cli(capsys, "report", "--nonesuch")
    assert code == 2 and err.count("\n") == 1


def test_world_sizes_are_the_doubling_ladder_plus_the_maximum():
    assert rank_ladder(1) == [1]
    assert rank_ladder(2) == [1, 2]
    assert rank_ladder(6) == [1, 2, 4, 6]
    assert rank_ladder(8) == [1, 2, 4, 8]


def test_largest_only_runs_the_gpus_world_size_alone_with_its_baseline():
    """CI ran --gpus 2 as world sizes 1 and 2, twice the launches it wanted: --largest-only keeps --gpus ranks
    (per node) and the baseline there, which parity and speedup_vs_local need; nothing at one rank is planned."""
    assert BenchConfig(gpus=8, impls=("stock",), ladder=False).world_sizes == [8]
    assert BenchConfig(gpus=2, impls=("stock",)).world_sizes == [1, 2]  # the ladder, as before
    grid = expand(BenchConfig(gpus=2, impls=("stock",), size="tiny", repeats=1, ladder=False), device="cpu")
    assert [(c.world_size, c.impl) for c in grid] == [(2, "local"), (2, "stock")]
    args = cli.build_parser().parse_args(["bench", "--gpus", "2", "--largest-only"])
    assert args.ladder is False and cli.build_parser().parse_args(["bench"]).ladder is True


def test_options_apply_only_to_strategies_that_accept_them():
    config = BenchConfig(gpus=2, impls=("naive", "stock"), options=(("bucket_cap_mb", ("1", "25")),), size="tiny",
                         repeats=1)  # fmt: skip
    grid = expand(config, device="cpu")
    by_impl = {}
    for c in grid:
        by_impl.setdefault(c.impl, []).append(c.impl_options)
    assert by_impl["naive"] == [{}, {}]  # one per world size, no bucket axis
    assert by_impl["stock"] == [{"bucket_cap_mb": 1.0}, {"bucket_cap_mb": 25.0}] * 2
    assert grid[0].impl == "local"  # the baseline is added, listed first (and run first in repeat 0's launches)
    assert len({c.config_id for c in grid}) == len(grid)


def test_each_pair_of_repeats_runs_an_order_then_its_reverse_and_ids_count_as_they_run():
    """Whatever a launch's place costs or gives (the first after its processes start, the drift along it) falls
    on every configuration alike, not on the baseline every time nor on the one listed after it."""
    grid = expand(BenchConfig(gpus=2, impls=("stock", "naive"), size="tiny", repeats=4), device="cpu")
    launches = {}
    for cfg in grid:
        launches.setdefault((cfg.repeat, cfg.world_size), []).append(cfg.impl)
    assert launches[(0, 1)] == launches[(0, 2)] == ["local", "stock", "naive"]
    assert launches[(1, 2)] == ["naive", "stock", "local"] and launches[(2, 1)] == ["stock", "naive", "local"]
    assert launches[(3, 2)] == ["local", "naive", "stock"]
    assert [launch.index("local") for key, launch in sorted(launches.items()) if key[1] == 2] == [0, 2, 2, 0]
    assert [c.config_id for c in grid] == sorted(c.config_id for c in grid)  # within a launch: as they run


def test_an_option_that_acts_only_with_another_runs_once_where_it_would_change_nothing():
    axes = (("comm_hook", ("none", "powersgd")), ("powersgd_rank", ("1", "4")))
    grid = expand(BenchConfig(gpus=2, impls=("stock",), options=axes, size="tiny", repeats=1), device="cpu")
    asked = [c.impl_options for c in grid if c.impl == "stock" and c.world_size == 2]
    assert asked == [{"comm_hook": "none"}, {"comm_hook": "powersgd", "powersgd_rank": 1},
                     {"comm_hook": "powersgd", "powersgd_rank": 4}]  # fmt: skip


def test_under_auto_a_configuration_that_can_only_be_skipped_is_planned_once_and_decides_nothing():
    def planned(impls):
        grid = expand(BenchConfig(gpus=2, impls=impls, size="tiny", repeats="auto"), device="cpu")
        return [(c.world_size, c.impl, c.repeat) for c in grid]

    # nn.DataParallel needs CUDA: held against stock it would be the verdict, but it can only be skipped
    alone = planned(("stock", "dataparallel"))
    assert alone.count((2, "dataparallel", 0)) == 1 and all(repeat == 0 for *_, repeat in alone)
    # beside a strategy that runs, that one's verdict earns two repeats; the skipped one still runs once
    with_flat = planned(("stock", "dataparallel", "flat"))
    assert (2, "flat", 1) in with_flat and (2, "stock", 1) in with_flat
    assert [c for c in with_flat if c[1] == "dataparallel"] == [(1, "dataparallel", 0), (2, "dataparallel", 0)]

    # a parameter server has nothing to serve for a workload without a remote part: skipped, so planned once
    def server(workload):
        grid = expand(BenchConfig(gpus=2, impls=("stock", "flat", "rpc_hybrid"), workloads=(workload,), size="tiny",
                                  repeats="auto"), device="cpu")  # fmt: skip
        return [c.repeat for c in grid if c.impl == "rpc_hybrid"]

    assert server("mlp") == [0, 0] and server("recsys") == [0, 1, 0, 1]


def test_config_rejects_bad_values_without_the_cli():
    with pytest.raises(ConfigError, match="--steps 0"):
        BenchConfig(gpus=1, impls=("naive",), steps=0)


def test_more_ranks_than_gpus_is_refused_unless_gloo_shares_them():
    from harness.config.bench import check_gpu_count

    with pytest.raises(ConfigError, match="--gpus 2 is more than the 1 GPU"):
        check_gpu_count(gpus=2, available=1, backend="nccl")
    check_gpu_count(gpus=2, available=1, backend="gloo")
    check_gpu_count(gpus=1, available=1, backend="nccl")


def test_dtype_auto_is_bf16_on_a_gpu_that_supports_it_and_fp32_elsewhere():
    from harness.config.precision import resolve_dtype

    assert resolve_dtype("auto", device="cuda", bf16_supported=True) == "bf16"
    assert resolve_dtype("auto", device="cuda", bf16_supported=False) == "fp32"  # a V100, a T4
    assert resolve_dtype("auto", device="cpu", bf16_supported=True) == "fp32"
    assert resolve_dtype("fp32", device="cuda", bf16_supported=True) == "fp32"  # asked for: kept
    assert resolve_dtype("fp16", device="cpu", bf16_supported=False) == "fp16"  # its grad scaler there too (torch 2.5)


def test_the_grid_carries_the_resolved_dtype_and_tf32_never_auto():
    config = BenchConfig(gpus=2, impls=("naive",), size="tiny", tf32=True)
    assert config.dtype == "auto"  # the default
    on_cpu = expand(config, device="cpu", bf16_supported=True)
    assert {(c.dtype, c.tf32) for c in on_cpu} == {("fp32", True)}
    on_gpu = expand(config, device="cuda", bf16_supported=True)
    assert {(c.dtype, c.tf32) for c in on_gpu} == {("bf16", True)}
    plain = expand(BenchConfig(gpus=1, impls=("naive",), size="tiny", dtype="fp32"), device="cuda", bf16_supported=True)
    assert {(c.dtype, c.tf32) for c in plain} == {("fp32", False)}


def test_the_sampler_period_is_kept_once_in_ms_and_old_plans_still_read():
    from harness.config.grid import Configuration

    cfg = expand(BenchConfig(gpus=1, impls=("naive",), size="tiny", mem_period_ms=50.0), device="cpu")[0]
    saved = cfg.to_json()
    assert saved["mem_period_ms"] == 50.0 and "mem_period_s" not in saved
    assert cfg.mem_period_s == 0.05  # what the sampler takes
    old = {**saved, "mem_period_s": 0.05}
    del old["mem_period_ms"], old["tf32"]  # a run.json written before both changes
    assert Configuration.from_json(old) == cfg


def test_bench_flags_reach_the_config(capsys):
    from harness.commands.bench import bench_config

    args = cli.build_parser().parse_args(["bench", "--tf32"])
    config = bench_config(args, default_gpus=2, all_impls=["naive"], command=("ddpbench",))
    assert config.dtype == "auto" and config.tf32 is True
    args = cli.build_parser().parse_args(["bench", "--dtype", "fp16"])
    config = bench_config(args, default_gpus=2, all_impls=["naive"], command=("ddpbench",))
    assert config.dtype == "fp16" and config.tf32 is False


def test_a_flag_is_one_field_its_type_default_and_doc_make_the_argument():
    """Adding a flag is adding one field: the parser, the help's default and the config come from it."""
    import argparse
    import dataclasses

    from harness.config.flags import STEERS, flag, from_args, whole

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Settings:
        laps: int = flag(3, "laps to run", parse=whole("--laps"))
        quiet: bool = flag(False, "say nothing")
        loud: bool = flag(True, "keep it down", negative=True, on_resume=STEERS)

    parser = argparse.ArgumentParser()
    arguments.add_flags(parser, Settings)
    assert from_args(Settings, parser.parse_args(["--laps", "5", "--no-loud"])) == Settings(laps=5, loud=False)
    assert from_args(Settings, parser.parse_args([])) == Settings()
    assert "laps to run (default: 3)" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["--laps", "five"])


def test_every_bench_setting_but_the_command_line_is_a_flag():
    import dataclasses

    from harness import cli

    flagged = {f.name for f in dataclasses.fields(BenchConfig) if "flag" in f.metadata}
    assert {f.name for f in dataclasses.fields(BenchConfig)} - flagged == {"command"}
    bench = cli.build_parser()._subparsers._group_actions[0].choices["bench"]
    dests = {action.dest for action in bench._actions}
    assert flagged <= dests
    assert "measured steps per configuration (default: 20)" in " ".join(bench.format_help().split())


def test_a_sweep_of_ddps_options_beside_its_defaults_has_verdicts_to_decide():
    """static_graph=false,true asks whether DDP's default matters: --repeats auto repeats it; true alone, with no
    step at the default to hold it against, decides nothing."""
    both = {"stock": [{"static_graph": False}, {"static_graph": True}], "local": [{}]}
    assert decides_anything(["local", "stock"], both, [1, 2])
    assert not decides_anything(["local", "stock"], {"stock": [{"static_graph": True}], "local": [{}]}, [1, 2])
    assert not decides_anything(["local", "stock"], both, [1])  # one rank communicates nothing
    at_5 = {"stock": [{"bucket_cap_mb": 5.0, "static_graph": False}, {"bucket_cap_mb": 5.0, "static_graph": True}]}
    assert not decides_anything(["stock"], at_5, [2])  # a review's: no stock as shipped (or at 25 MiB) to hold it to


@pytest.mark.parametrize("count", range(2, 8))
def test_every_even_repeat_count_gives_every_configuration_the_same_mean_place(count):
    """Rotation alone gave stock, listed after the baseline, places 1 and 0 at --repeats auto's two repeats where the
    last option got 4 and 3: on a CPU whose early places read slow, every option read faster than stock."""
    members = list(range(count))
    for repeats in range(2, 2 * count + 1, 2):
        places = {m: [rotated(members, r).index(m) for r in range(repeats)] for m in members}
        assert {sum(p) for p in places.values()} == {repeats * (count - 1) / 2}, (repeats, places)
    firsts = [rotated(members, r)[0] for r in range(2 * count)]
    assert sorted(firsts) == sorted(members * 2)  # the cold first place falls on each alike, the baseline's too
    assert all(sorted(rotated(members, r)) == members for r in range(2 * count))
