"""`bench` refuses bad input before anything is written (one line, exit 2): non-finite numbers, a
DDPBENCH_FAULT it cannot read, an option given twice, an empty cap list; repeated values run once."""

from __future__ import annotations

import pytest
from bad_input import refused

from harness import cli
from harness.commands import bench
from harness.config import bench as cfgmod
from harness.config import grid


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--timeout", "inf", "--timeout 'inf' is not a time; give e.g. 90s, 20m or 1h"),
        ("--timeout", "nan", "--timeout 'nan' is not a time; give e.g. 90s, 20m or 1h"),
        ("--mem-period-ms", "nan", "--mem-period-ms 'nan' is not a period in milliseconds (a finite number)"),
        ("--mem-period-ms", "-inf", "--mem-period-ms '-inf' is not a period in milliseconds (a finite number)"),
    ],
)
def test_a_non_finite_float_flag_is_refused(capsys, tmp_path, flag, value, said):
    assert said in refused(capsys, tmp_path, f"{flag}={value}")


def test_several_gpu_counts_for_bench_are_refused_with_the_one_count_that_runs_them(capsys, tmp_path):
    """'bench --gpus 1,2' read only "--gpus '1,2' is not a whole number": it named no valid value, nor that one
    count runs the ladder of world sizes up to it."""
    said = refused(capsys, tmp_path, "--gpus", "1,2")
    assert "--gpus '1,2' is not a whole number; give one, e.g. --gpus 4 (it runs the world sizes 1, 2 and 4)" in said


def test_timeout_reads_a_time_as_budget_does():
    """'--timeout 5m' was refused as 'not a number of seconds' beside --budget 5m, which was taken."""
    parse = cli.build_parser().parse_args
    assert parse(["bench", "--timeout", "5m"]).timeout_s == 300 and parse(["bench", "--timeout", "90"]).timeout_s == 90


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--repeats", "often"), "--repeats 'often' is not valid; give a whole number ≥ 1 or 'auto'"),
        (("--repeats", "0"), "--repeats 0 is not valid; give a whole number ≥ 1 or auto"),
        # once every configuration failed on 'Overflow when unpacking long long', its rows written
        (("--seed", "99999999999999999999999"), "--seed 99999999999999999999999 is not valid; give a whole number"),
        (("--seed=-1",), "--seed -1 is not valid; give a whole number from 0 to"),
        (
            ("--max-repeats", "1"),
            "--max-repeats 1 is not valid; give a whole number ≥ 2 (a verdict needs two repeats a side)",
        ),
        (
            ("--max-repeats", "0"),
            "--max-repeats 0 is not valid; give a whole number ≥ 2 (a verdict needs two repeats a side)",
        ),
        (("--budget", "20x"), "--budget '20x' is not a time; give e.g. 90s, 20m or 1h"),
        (("--budget=-5m",), "--budget '-5m' is not valid; give a positive time, e.g. 20m"),
        (
            ("--budget", "-5m"),
            "argument --budget: expected one argument (a value that starts with '-' is given as --budget=VALUE)",
        ),
        (("--budget", "0"), "--budget '0' is not valid; give a positive time"),
        (("--repeats", "2", "--budget", "2m"), "--budget applies only with --repeats auto (here --repeats 2)"),
        (("--repeats", "2", "--max-repeats", "5"), "--max-repeats applies only with --repeats auto (here --repeats 2)"),
    ],
)
def test_bad_repeats_max_repeats_or_budget_is_refused(capsys, tmp_path, args, said):
    assert said in refused(capsys, tmp_path, *args)


def test_two_options_joined_by_a_comma_are_told_apart(capsys, tmp_path):
    """The comma separates one option's values: 'hidden_size=64,num_attention_heads=3' once read as a
    hidden size of 'num_attention_heads=3', refused as 'not a whole number'."""
    said = refused(capsys, tmp_path, "--wopt", "hidden_size=64,num_attention_heads=3")
    assert said == ("ddpbench: error: --wopt 'hidden_size=64,num_attention_heads=3' gives num_attention_heads as a "
                    "value of hidden_size; commas separate the values of one option: give each option its own --wopt "
                    "(--wopt hidden_size=64 --wopt num_attention_heads=3)\n")  # fmt: skip
    said = refused(capsys, tmp_path, "--wopt", "seq_len=64,128,hidden_size=32,num_heads=2")  # every value kept
    assert said.endswith("(--wopt seq_len=64,128 --wopt hidden_size=32 --wopt num_heads=2)\n")
    # A flag's own refusal reads as every other bad value: argparse once framed it ('ddpbench bench: error:
    # argument --budget: --budget '5x' is … (see --help)').
    budget = refused(capsys, tmp_path, "--budget", "5x")
    assert budget == "ddpbench: error: --budget '5x' is not a time; give e.g. 90s, 20m or 1h\n"


def test_a_budget_reads_seconds_minutes_and_hours():
    from harness.config.flags import duration

    parse = duration("--budget")
    assert (parse("90s"), parse("20m"), parse("1.5h"), parse("45")) == (90.0, 1200.0, 5400.0, 45.0)


def test_a_config_made_in_code_refuses_non_finite_values_too():
    with pytest.raises(cfgmod.ConfigError, match="--timeout inf is not valid"):
        cfgmod.BenchConfig(gpus=1, impls=("stock",), timeout_s=float("inf"))
    with pytest.raises(cfgmod.ConfigError, match="--mem-period-ms nan is not valid"):
        cfgmod.BenchConfig(gpus=1, impls=("stock",), mem_period_ms=float("nan"))


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("bogus", "DDPBENCH_FAULT kind 'bogus' is not one of raise, oom, stop, kill, exit, slow"),
        ("explode:rank=1", "DDPBENCH_FAULT kind 'explode' is not one of"),
        ("kill:color=red", "DDPBENCH_FAULT condition 'color' is not one of impl, world, repeat, cap, rank, step, ms"),
        ("kill:rank=1,step=abc", "DDPBENCH_FAULT step='abc' is not a whole number ≥ 0"),
        ("kill:rank", "DDPBENCH_FAULT condition 'rank' has no value"),
        ("kill:rank=1;raise:step=-1", "DDPBENCH_FAULT step='-1' is not a whole number ≥ 0"),
        ("slow:rank=1", "DDPBENCH_FAULT ms=M (M > 0) goes with slow, and slow needs it"),
        ("slow:rank=1,ms=0", "DDPBENCH_FAULT ms=M (M > 0) goes with slow, and slow needs it"),
        ("kill:rank=1,ms=20", "DDPBENCH_FAULT ms=M (M > 0) goes with slow, and slow needs it"),
    ],
)
def test_a_fault_switch_it_cannot_read_is_bad_input_before_any_run_folder(capsys, tmp_path, monkeypatch, fault, said):
    monkeypatch.setenv("DDPBENCH_FAULT", fault)
    err = refused(capsys, tmp_path, "--impls", "stock")
    assert (
        said in err
        and "kinds raise, oom, stop, kill, exit, slow, conditions impl, world, repeat, cap, rank, step, ms" in err
    )
    assert f"DDPBENCH_FAULT={fault!r}" in err


def test_collectives_reads_the_fault_switch_first_too(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DDPBENCH_FAULT", "bogus")
    assert cli.main(["collectives", "--results", str(tmp_path / "results")]) == 2
    assert "DDPBENCH_FAULT kind 'bogus'" in capsys.readouterr().err and not (tmp_path / "results").exists()


def test_a_gpu_zygote_switch_it_cannot_read_is_bad_input_before_any_run_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DDPBENCH_GPU_ZYGOTE", "off")
    assert "DDPBENCH_GPU_ZYGOTE='off' is not valid; choose one of 0, 1" in refused(capsys, tmp_path, "--impls", "stock")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--opt", "bucket_cap_mb=1", "--bucket-cap-mb", "5"],
         "option 'bucket_cap_mb' is given twice (--opt bucket_cap_mb=1 and --bucket-cap-mb 5)"),
        (["--opt", "bucket_cap_mb=1", "--opt", "bucket_cap_mb=5"],
         "option 'bucket_cap_mb' is given twice (--opt bucket_cap_mb=1 and --opt bucket_cap_mb=5)"),
        (["--bucket-cap-mb", ""], "--bucket-cap-mb is empty; give it a value"),  # as every flag given '' reads
        (["--resume", ""], "--resume is empty; give it a value"),  # once started a whole new default run
        (["--results="], "--results is empty; give it a value"),  # once the working folder
        (["--bucket-cap-mb", " , "], "--bucket-cap-mb is empty"),
        (["--impls", ""], "--impls is empty"),
        (["--bucket-cap-mb", "1,,5"], "--bucket-cap-mb: '1,,5' has an empty item between its commas; give each value "
                                      "once, as 1,5"),
        (["--impls", "stock,"], "--impls: 'stock,' has an empty item"),
        (["--opt", "bucket_cap_mb=1,,5"], "'1,,5' has an empty item"),
        (["--opt", "static_graph="], "option 'static_graph' has no value; give static_graph=VALUE[,VALUE…], e.g. "
                                     "static_graph=False"),
    ],
)  # fmt: skip
def test_an_option_given_twice_or_an_empty_list_is_refused(capsys, tmp_path, args, said):
    assert said in refused(capsys, tmp_path, "--impls", "stock", *args)


def planned(capsys, *args: str) -> list[str]:
    parsed = cli.build_parser().parse_args(["bench", "--gpus", "2", "--size", "tiny", *args])
    config = bench.bench_config(parsed, default_gpus=2, all_impls=["stock"], command=())
    return [c.label() for c in grid.expand(config, device="cpu")]


def test_repeated_values_run_once_and_are_said_to(capsys):
    labels = planned(
        capsys, "--impls", "stock,stock", "--workloads", "mlp,mlp", "--bucket-cap-mb", "1,1,5,1.0", "--repeats", "1"
    )
    note = capsys.readouterr().out
    assert "ddpbench: note: --impls repeats stock: each runs once" in note
    assert "ddpbench: note: --workloads repeats mlp: each runs once" in note
    assert "ddpbench: note: --bucket-cap-mb repeats 1: each runs once" in note
    assert labels == [
        "w1 mlp/tiny local", "w1 mlp/tiny stock bucket_cap_mb=1", "w1 mlp/tiny stock bucket_cap_mb=5",
        "w2 mlp/tiny local", "w2 mlp/tiny stock bucket_cap_mb=1", "w2 mlp/tiny stock bucket_cap_mb=5",
    ]  # fmt: skip
    assert len(set(labels)) == len(labels)


@pytest.mark.parametrize("gpus", ["0", "-1"])
def test_collectives_refuses_fewer_than_two_ranks_in_one_line_before_its_ranks_start(capsys, tmp_path, gpus):
    """Its ranks' imports start as soon as the device is known (`torchrun.start_early`): not from a rank count
    that cannot be (0 once divided the cores by zero)."""
    assert cli.main(["collectives", "--gpus", gpus, "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert f"--gpus {gpus} is not valid for collectives; give 2 or more ranks" in err and err.count("\n") == 1
    assert not (tmp_path / "results").exists()


def test_collectives_warns_when_its_ranks_outnumber_the_cores(capsys, monkeypatch):
    """bench warned of it; collectives once reported a 3-rank contention on 2 cores as the link's."""
    import types

    from harness.commands import collectives
    from harness.config import ranks

    monkeypatch.setattr(ranks, "available_cpus", lambda: 2)
    collectives._warn_if_cores_shared(types.SimpleNamespace(device="cpu", gpus=3))
    assert "3 ranks on 2 CPU cores: ranks take turns on the cores" in capsys.readouterr().err
    collectives._warn_if_cores_shared(types.SimpleNamespace(device="cpu", gpus=2))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["predict", "--workload", "mlp", "--size", "tiny", "--busbw", "90GB/s", "--caps", "1,,5"],
         "--caps '1,,5' has an empty item between its commas; give each value once, as 1,5"),
        (["predict", "--run", "r", "--cluster", "dgx-h100", "--nodes", "1,2,"], "--nodes '1,2,' has an empty item"),
        (["collectives", "--ops", "all_reduce,", "--results", "{tmp}/results"], "--ops 'all_reduce,' has an empty"),
        # a review's: nan first once passed (it sorts anywhere), negative batches reached torch, a GPU count of
        # millions laid out every rank's shard for minutes
        (["predict", "--workload", "mlp", "--busbw", "9GB/s", "--caps", "nan,5"], "--caps 'nan,5' is not valid"),
        (["predict", "--workload", "mlp", "--busbw", "9GB/s", "--batch-size=-1"], "--batch-size -1 is not valid"),
        (["predict", "--workload", "mlp", "--busbw", "9GB/s", "--batch-size", "0"], "--batch-size 0 is not valid"),
        (["predict", "--workload", "mlp", "--busbw", "9GB/s", "--gpus", "100000000"], "give a whole number from 1 to"),
        (["predict", "--workload", "mlp", "--cluster", "dgx-h100", "--nodes", "100000"], "whole numbers ≥ 1 up to"),
        (["predict", "--workload", "mlp,gpt2", "--busbw", "9GB/s"], "predict profiles one workload; give one of them"),
    ],
)  # fmt: skip
def test_a_bad_list_or_number_of_predict_and_collectives_is_refused_in_one_line(capsys, tmp_path, monkeypatch, args,
                                                                               said, no_early_ranks):  # fmt: skip
    from harness.commands.predict import gradient_profile

    def profiled(*_, **__):  # `--nodes 100000` was refused after a profile's steps (a busy machine's warning first)
        raise AssertionError("a profile measured before the input was checked")

    monkeypatch.setattr(gradient_profile, "_measure_profile", profiled)
    assert cli.main([arg.format(tmp=tmp_path) for arg in args]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "results").exists()


def test_an_option_no_chosen_strategy_takes_names_the_strategies_that_do(capsys, tmp_path):
    said = refused(capsys, tmp_path, "--impls", "naive", "--bucket-cap-mb", "5")
    assert "no chosen strategy has option 'bucket_cap_mb'; valid options: (none); " in said
    assert "stock" in said.split("(none); ")[1] and said.rstrip().endswith("take it")


def test_several_gpu_counts_for_a_profile_measured_here_point_to_a_run_or_a_clusters_nodes(capsys, tmp_path):
    """A walkthrough gave predict --gpus 16,64 and read only that it is not a whole number: on a cluster they are GPU
    counts to price (whole nodes, or within one), with a run its world sizes; a profile measured here is one world
    size's (its threads are that size's share of the cores), and the line says so and names the other two ways."""
    args = ["predict", "--workload", "mlp", "--results", str(tmp_path), "--busbw", "9GB/s", "--gpus", "16,64"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--gpus 16,64: one world size for a profile measured here (its " \
        "threads are one world size's share of the cores); several with a bench run's profile (--run RUN --gpus " \
        "16,64) or as GPU counts on a cluster's nodes: --cluster NAME|FILE --gpus 2,4" in err  # fmt: skip


def test_predict_profiles_the_optimizer_asked_and_says_it(capsys):
    """predict --workload stepped SGD alone: Adam's time, what ZeRO-1's and FSDP2's leads rest on, was not there."""
    args = ["predict", "--workload", "mlp", "--size", "tiny", "--busbw", "9GB/s", "--gpus", "2", "--profile-steps", "2"]
    assert cli.main([*args, "--optimizer", "adam"]) == 0
    assert "ddpbench predict: profiling mlp/tiny (batch 8, adam) here on cpu" in capsys.readouterr().out
    assert cli.main([*args, "--optimizer", "adamw"]) == 0  # what most transformers train with: its own choice
    assert "ddpbench predict: profiling mlp/tiny (batch 8, adamw) here on cpu" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        cli.main([*args, "--optimizer", "lamb"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "--optimizer: invalid choice: 'lamb'" in err and len(err.splitlines()) == 1
