"""`make bench` variables map onto `ddpbench bench` flags (checked with `make -n`, nothing runs)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import PROJECT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def dry_run(*variables: str) -> str:
    done = subprocess.run(["make", "-n", *variables], cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bench_variables_become_cli_flags_with_spaces_turned_into_commas():
    out = dry_run("bench", "GPUS=8", "IMPLS=naive stock", "WORKLOADS=mlp,gpt2", "BUCKETS=1 25", "SIZE=small", "STEPS=7")
    command = next(line for line in out.splitlines() if "ddpbench bench" in line)
    for flag in ("--gpus 8", "--impls naive,stock", "--workloads mlp,gpt2", "--bucket-cap-mb 1,25", "--size small"):
        assert flag in command
    assert "--steps 7" in command
    assert "ddpbench report" in out  # the report follows a finished run


def test_a_list_typed_with_commas_and_spaces_is_one_list_and_an_empty_item_stays_for_bench_to_refuse():
    """`make bench BUCKETS="1, 25"` (as the CLI takes it) became --bucket-cap-mb 1,,25, refused for an empty item
    the user never typed."""
    command = next(line for line in dry_run("bench", "BUCKETS=1, 25", "IMPLS=naive ,stock").splitlines()
                   if "ddpbench bench" in line)  # fmt: skip
    assert "--bucket-cap-mb 1,25 " in command and "--impls naive,stock " in command, command
    assert "--bucket-cap-mb 1,,25 " in dry_run("bench", "BUCKETS=1,,25")


def test_sweep_defaults_to_a_ladder_of_bucket_caps_including_ddps_default():
    out = dry_run("sweep", "GPUS=2")
    assert "--bucket-cap-mb 1,5,10,25,50,100" in out


def test_sweep_repeats_until_decided_by_default_and_repeats_overrides_it():
    assert "--repeats auto" in dry_run("sweep", "GPUS=2")
    assert "--budget" not in dry_run("sweep", "GPUS=2").split("ddpbench bench", 1)[-1]  # a sweep: until decided
    # unless you give it one: BUDGET=10m once vanished on its way to the bench it runs
    assert "--budget 10m" in dry_run("sweep", "GPUS=2", "BUDGET=10m").split("ddpbench bench", 1)[-1]


def test_bench_gives_its_repeats_a_budget_that_budget_changes_or_removes():
    assert "--budget 5m" in dry_run("bench")
    assert "--budget 20m" in dry_run("bench", "BUDGET=20m")
    assert "--budget" not in dry_run("bench", "BUDGET=")
    assert "--repeats 8" in dry_run("sweep", "GPUS=2", "REPEATS=8")


def test_a_dry_run_builds_no_report_and_optimizer_is_a_variable():
    """`make bench ARGS=--dry-run` printed the forecast, then its report step failed on the results folder a dry
    run never writes ('--results … does not exist', make: *** Error 2); the sgd warning's --optimizer adamw had no
    variable; bench's last line told the user to build the pages make builds next."""
    out = dry_run("bench", "ARGS=--dry-run", "OPTIMIZER=adamw")
    assert '[ -z "--dry-run" ]; then' in out  # the report only where ARGS has no --dry-run
    assert '[ -z "" ]; then' in dry_run("bench")
    assert '[ -z "--dry-run" ]; then' in dry_run("sweep", "GPUS=2", "ARGS=--dry-run")
    command = next(line for line in out.splitlines() if "ddpbench bench" in line)
    assert "--optimizer adamw" in command and "DDPBENCH_REPORT_NEXT=1 " in command
