"""`predict --run` takes the run's caps, beside the default list, only when the run swept two or more; otherwise the
default list (a single recorded cap, DDP's default layout recorded as 25 included, is no sweep), and says which.
A profile `predict` measures now says its steps when they are slow."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from harness import cli
from harness.results import store

DATA = Path(__file__).resolve().parent.parent / "data"


def _with_ddp_default_recorded(results: Path) -> None:
    """tests/data/cpu_run as a run made today records it: stock at DDP's default layout, cap 25."""
    shutil.copytree(DATA / "cpu_run", results / "cpu_run")
    for part in (results / "cpu_run" / "configs").glob("*.parquet"):
        row = store.read_config_row(results / "cpu_run", part.stem)
        if row["impl"] == "stock":
            store.write_parquet(part, [{**row, "bucket_cap_mb": 25.0}], store.CONFIG_SCHEMA)


def table_caps(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()[0][0].isdigit()]


def test_a_run_without_a_sweep_gets_the_default_caps_not_its_one_recorded_cap(tmp_path, capsys):
    _with_ddp_default_recorded(tmp_path)
    rows = tmp_path / "rows.csv"
    code = cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--busbw", "10GB/s", "--gpus", "8",
                     "--out", str(rows)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, out
    assert "ddpbench predict: caps: the default list, 1,5,10,25,50,100 MiB (the run swept no cap; --caps" in out
    # a CPU run's compute against a network typed in: said, as predict --cluster says it
    assert "the profile's compute is a CPU's, far slower than a GPU's, set against the network given (--busbw" in err
    assert table_caps(out) == ["1", "5", "10", "25", "50", "100"]
    written = pd.read_csv(rows)  # --out writes the rows the table printed, outside --cluster too
    assert f"wrote {len(written)} rows to {rows}" in out and set(written["world_size"]) == {8}
    assert written["bucket_cap_mb"].tolist() == [1, 5, 10, 25, 50, 100] and written["step_ms"].gt(0).all()


def test_a_swept_run_gets_its_own_caps_and_says_so(tmp_path, capsys):
    shutil.copytree(DATA / "bucket_sweep", tmp_path / "bucket_sweep")  # predict stores the profile it measures
    code = cli.main(
        ["predict", "--run", "bucket_sweep", "--results", str(tmp_path), "--busbw", "10GB/s", "--gpus", "8"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ddpbench predict: caps: the run's sweep, 1, 5, 25 MiB, beside the default list, 1,5,10,25,50,100" in out
    # the model prices any cap from the one profile: a sweep that stopped at 25 MiB must not hide 50 or 100
    assert table_caps(out)[:6] == ["1", "5", "10", "25", "50", "100"]
    # the profile is said as measured and stored, before the calibration that scales it (as --cluster says it)
    stored = next(line for line in out.splitlines() if "and stored with it: forward" in line)
    scaled = next(line for line in out.splitlines() if "compute scaled ×" in line)
    assert out.index(stored) < out.index(scaled)
    profile = pd.read_parquet(next((tmp_path / "bucket_sweep" / "gradprofile").glob("*.parquet")))
    assert f"forward {profile['forward_ms'].iloc[0]:.2f} ms" in stored


def test_a_profile_measured_now_says_its_steps_only_when_they_are_slow(capsys):
    from harness.commands.console.profiling import SlowStepProgress

    now = [0.0]
    slow, quick = SlowStepProgress(), SlowStepProgress()
    slow.clock = quick.clock = lambda: now[0]
    slow.began = quick.began = 0.0
    now[0] = 0.05
    quick(1, 7)  # 50 ms a step: nothing said
    assert capsys.readouterr().out == ""
    now[0] = 4.0
    slow(1, 7)  # the model's build and a step: said
    now[0] = 6.0
    slow(2, 7)  # 2 s a step: the time left at that pace, not at the build's (once 'about 15 s')
    assert capsys.readouterr().out == ("ddpbench predict: profiled step 1/7 (4 s; about 24 s to go)\n"
                                       "ddpbench predict: profiled step 2/7 (6 s; about 10 s to go)\n")  # fmt: skip
    assert quick.step_seconds() == [0.05] and slow.step_seconds() == [4.0, 2.0]


def test_a_profile_measured_now_on_a_busy_or_noisy_machine_says_so(capsys, monkeypatch):
    """A review's predict under load: forward 29 ms against 0.16 ms quiet, and nothing said of it."""
    import os

    from harness.commands.console import profiling
    from harness.config import ranks

    monkeypatch.setattr(ranks, "available_cpus", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (4.5, 4.0, 3.0))
    profiling.warn_if_busy()
    assert "this machine is busy (load 4.5 on 2 cores): the profile measured now shares its cores" in (
        capsys.readouterr().err
    )
    profiling.warn_if_noisy([0.010, 0.011, 0.030])
    assert "the profile's 3 steps took 10–30 ms (CV 0.66)" in capsys.readouterr().err
    profiling.warn_if_noisy([2.22, 6.37, 3.0])  # once '2.22e+03–6.37e+03 ms'
    assert "the profile's 3 steps took 2220–6370 ms" in capsys.readouterr().err
    profiling.warn_if_noisy([0.010, 0.0101, 0.0102])
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    profiling.warn_if_busy()
    assert capsys.readouterr().err == ""


def test_a_profile_measured_now_on_the_cpu_gets_a_ranks_share_of_the_cores(capsys, monkeypatch):
    """It ran with all the process's threads while bench gives each of N ranks cores // N: its compute read
    faster than a rank's. The caller's thread count is restored after."""
    import torch

    from harness.commands.predict import gradient_profile
    from harness.config import ranks

    given = []
    measure = gradient_profile._measure_profile

    def spy(setup, **kwargs):
        given.append(kwargs.get("threads"))
        return measure(setup, **kwargs)

    before = torch.get_num_threads()
    monkeypatch.setattr(ranks, "available_cpus", lambda: 8)
    monkeypatch.setattr(gradient_profile, "_measure_profile", spy)
    assert cli.main(["predict", "--workload", "mlp", "--size", "tiny", "--gpus", "4", "--busbw", "1GB/s"]) == 0
    assert given == [2] and "here on cpu with 2 threads" in capsys.readouterr().out
    assert torch.get_num_threads() == before
