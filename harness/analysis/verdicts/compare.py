"""`ddpbench compare BASE NEW`: did anything get significantly slower?

Configurations are matched by what they measure (strategy, options as they act, workload, size,
world size, batch, dtype, device) and by the settings that change the measurement without being an
option (threads per rank, backend, TF32, the first bucket's cap, a timing hook the step paid for):
two configurations that differ in one of those are not the same measurement, so they are not
judged, and `compare` names the setting (the command counts them as undecided, never as slower).
A strategy each run measured at one option setting is paired with itself across them (roles.option_pairs:
one DDP option's change, judged without --across-strategies, its memory gated as one strategy's).

The unit of evidence is the repeat: each repeat of a configuration is summarised by its median
step (the slowest rank per step), and the two runs' repeat medians are judged by `stats.verdict`
(Welch's t on the logs: the ratio, its interval, 95 % or Bonferroni's for several, and 'too few repeats
to tell' when they cannot decide). See docs/statistics.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts import memory_compare
from harness.analysis.verdicts.environment import environment_differences, fault_rows
from harness.analysis.verdicts.gate_outcome import (  # noqa: F401 (the outcome, read as compare.outcome)
    FAILED_WORDS,
    PASSED,
    REGRESSED,
    UNDECIDED,
    outcome,
    regressed,
)
from harness.config.bench import ConfigError
from harness.results import contention, store
from harness.results.layout import SUMMARY_JSON
from harness.results.values import configuration_label, row_label, settings_words, timed_by_hook

MATCH_KEYS = ("impl", "impl_options", "workload", "size", "world_size", "nnodes", "batch_size", "grad_accum", "dtype",
              "optimizer", "device")  # fmt: skip
SETTING_KEYS = ("threads_per_rank", "backend", "tf32", "first_bucket_cap_mb", "timed_by_hook")
"""Recorded per configuration, not in its options, and each changes the step time: on the CPU the
threads per rank follow --gpus (a --gpus 1 run gives a world-size-1 rank twice the threads of a
--gpus 2 run's), since torch 2.9 an explicit bucket cap also caps the first bucket, and
--bucket-timeline times DDP's buckets through a hook the step pays for (values.timed_by_hook, from
`comm_note`). A null (a run from before the column, a strategy timed at no cost) matches any value."""


def load_samples(run: Path) -> tuple[dict, pd.DataFrame]:
    """A run folder's (metadata, slowest rank's measured step per configuration and step, with its keys)."""
    configs, steps = _configs(run), store.read_steps(run)
    measured = steps[~steps["warmup"]]
    slowest = measured.groupby(["config_id", "step"], as_index=False)["step_ms"].max()
    hooked = configs["comm_note"].map(timed_by_hook) if "comm_note" in configs else None
    configs = memory_compare.with_peaks(configs.assign(timed_by_hook=hooked))  # each repeat's peak per rank
    for key in SETTING_KEYS:
        if key not in configs:  # a run from before the column: not recorded
            configs = configs.assign(**{key: None})
    ok = configs[configs["status"] == "ok"][["config_id", *MATCH_KEYS, *SETTING_KEYS, "peak_mb", "peak_column"]]
    meta = store.read_run_meta(run)
    meta["fault_configs"] = fault_rows(meta, contention.read(run))  # the rows an injected fault's note is of
    return meta, slowest.merge(ok, on="config_id")


def _configs(run: Path, *, across_strategies: bool = False) -> pd.DataFrame:
    """A run's configurations, options as they act (roles.with_acting_options: `{}` in one run matches
    `gradient_as_bucket_view=false`, the default asked by name, in the other); no baseline across strategies."""
    configs = roles.with_acting_options(store.read_configs(run))
    return _without_baseline(configs) if across_strategies else configs


def repeat_figures(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per repeat (configuration id): its median step, the CV of its steps, the
    batch-means uncertainty of its mean and its drift within the window, from the steps in order."""
    rows = []
    for config_id, repeat in samples.sort_values("step").groupby("config_id"):
        rows.append({"config_id": config_id, **stats.repeat_summary(repeat["step_ms"].to_numpy())})
    figures = pd.DataFrame(rows, columns=["config_id", "median_ms", "cv", "rel_se", "drift", "drift_se"])
    keys = samples.drop(columns=["step", "step_ms"]).drop_duplicates("config_id")
    return figures.merge(keys, on="config_id")


def match_keys(*, across_strategies: bool) -> list[str]:
    """What makes two configurations the same measurement; across strategies, the strategy is not part of it."""
    return [k for k in MATCH_KEYS if not (across_strategies and k in ("impl", "impl_options"))]


def _without_baseline(samples: pd.DataFrame) -> pd.DataFrame:
    return samples[~roles.is_baseline(samples)]


def _check_unambiguous(samples: pd.DataFrame, keys: list[str], run_id: str) -> None:
    settings = samples["impl"] + " " + samples["impl_options"].fillna("")  # a walkthrough's 4 option settings pooled
    if (samples.assign(setting=settings).groupby(keys, dropna=False)["setting"].nunique() > 1).any():
        raise ConfigError(f"run {run_id!r} has several strategies or option settings per setup; --across-strategies "
                          "compares runs of one strategy at one setting each (without it, compare pairs each "
                          "strategy with itself, at another option setting where each run has one)")  # fmt: skip


def _strategy_label(base: pd.DataFrame, new: pd.DataFrame) -> str:
    """'stock', or 'naive -> bucketed' when the two runs measured different strategies."""
    before, after = base["impl"].iloc[0], new["impl"].iloc[0]
    return before if before == after else f"{before} -> {after}"


def _configuration(base: pd.DataFrame, new: pd.DataFrame) -> str:
    """'stock comm_hook=fp16', or 'stock -> fsdp' where the runs measured different configurations (across
    strategies): each side named as everywhere else (values.configuration_label)."""
    before, after = (row_label(rows.iloc[0]) for rows in (base, new))
    return before if before == after else f"{before} -> {after}"


def named(row) -> str:
    """A compared row's configuration as the console and the page name it: the reference as shipped and its
    stand-in (`paired`), else `configuration`; a comparison kept before that column, by its own strategy and options."""
    for column in ("paired", "configuration"):
        if isinstance(said := getattr(row, column, None), str):
            return said
    options = getattr(row, "impl_options", None)
    return configuration_label(row.impl, options if isinstance(options, str) else None)


def setting_keys(*, across_strategies: bool) -> list[str]:
    """Across strategies the bucket layout belongs to the strategy (naive has none), so it is not a setting."""
    return [k for k in SETTING_KEYS if not (across_strategies and k == "first_bucket_cap_mb")]


def _known(value) -> bool:
    return value is not None and not pd.isna(value)


SETTING_WORDS = {"timed_by_hook": "DDP's buckets timed (--bucket-timeline)"}  # a derived column: said as the flag


def _setting_differences(base: dict, new: dict) -> list[str]:
    """'threads_per_rank 1 vs 2' for each setting both runs recorded and that differs."""
    return [f"{SETTING_WORDS.get(k, k)} {base[k]!r} vs {new[k]!r}" for k in base
            if _known(base[k]) and _known(new[k]) and base[k] != new[k]]  # fmt: skip


def _label(keys: dict) -> str:
    strategy = configuration_label(keys["impl"], keys.get("impl_options"), grad_accum=keys.get("grad_accum"))
    return f"w{keys['world_size']} {keys['workload']}/{keys['size']} {strategy}"


def _pair_settings(base: pd.DataFrame, new: pd.DataFrame, settings: list[str]):
    """Each setting of `base` with the `new` repeats that share it (exactly, else up to unrecorded
    values), or with None and the differences that kept every one of them apart."""
    new_sets = [(dict(zip(settings, k, strict=True)), g) for k, g in new.groupby(settings, dropna=False)]
    for key, base_rows in base.groupby(settings, dropna=False):
        given = dict(zip(settings, key, strict=True))
        fits = [(s, g) for s, g in new_sets if not _setting_differences(given, s)]
        exact = [(s, g) for s, g in fits if all(_known(given[k]) == _known(s[k]) for k in settings)]
        chosen = (exact or fits or [(None, None)])[0][1]
        yield base_rows, chosen, [] if fits else _setting_differences(given, new_sets[0][0])


def compare(
    base_run: Path, new_run: Path, *, threshold: float, across_strategies: bool = False,
    memory_threshold: float = memory_compare.DEFAULT_MEMORY_THRESHOLD,
) -> tuple[pd.DataFrame, list[str], list[str]]:  # fmt: skip
    """(one row per matched configuration, environment warnings, configurations not compared).

    A configuration of BASE whose counterpart in NEW differs in a setting (SETTING_KEYS) is a
    different measurement: it gets a line naming the settings and values, not a verdict.
    `across_strategies` matches configurations whatever their strategy (the `local` baseline
    set aside), so a run of one strategy can be judged against a run of another. Each row also judges the
    repeats' peak memory against `memory_threshold` (memory_compare), at the same confidence.
    """
    base_meta, base = load_samples(base_run)
    new_meta, new = load_samples(new_run)
    keys = match_keys(across_strategies=across_strategies)
    if across_strategies:
        base, new = _without_baseline(base), _without_baseline(new)
        _check_unambiguous(base, keys, base_run.name)
        _check_unambiguous(new, keys, new_run.name)
    base, new = repeat_figures(base), repeat_figures(new)
    settings = setting_keys(across_strategies=across_strategies)
    new_groups = {_plain(key): group for key, group in new.groupby(keys, dropna=False)}
    stand_ins, pairs, not_compared = _stand_ins(base_run, new_run, keys), [], []
    for key, base_group in base.groupby(keys, dropna=False):  # null keys (older rows) match too: _plain
        found, words = (_plain(key), "") if _plain(key) in new_groups else stand_ins.get(_plain(key), (None, ""))
        if found not in new_groups:
            continue
        matched, stand_in = dict(zip(keys, key, strict=True)), found != _plain(key)
        # DDP as shipped against its stand-in: their first buckets differ by design (said in the row), not a setting
        layout = [k for k in settings if not (stand_in and k == "first_bucket_cap_mb")]
        for base_rows, new_rows, differences in _pair_settings(base_group, new_groups[found], layout):
            if new_rows is None:
                label = _label({**matched, "impl": base_rows["impl"].iloc[0]})
                not_compared.append(f"{label}: not compared, a different measurement: {', '.join(differences)}")
            else:
                paired = _paired(words, base_rows, new_rows) if stand_in else {}
                pairs.append(({**matched, **paired}, base_rows, new_rows))
    confidence = family_confidence(len(pairs))  # the gate fails on any one: its error is the family's
    rows = [{**matched, **judge(b, n, threshold=threshold, confidence=confidence), "configurations_judged": len(pairs),
             **memory_compare.judge(b, n, threshold=memory_threshold, confidence=confidence,
                                    gates=" -> " not in _strategy_label(b, n))}  # another strategy's: said
            for matched, b, n in pairs]  # fmt: skip
    return pd.DataFrame(rows), environment_differences(base_meta, new_meta), not_compared


def _plain(key) -> tuple:
    """A group key with every null as None (NaN never equals NaN in a lookup)."""
    return tuple(None if not isinstance(v, str) and pd.isna(v) else v for v in key)


def _stand_ins(base_run: Path, new_run: Path, keys: list[str]) -> dict[tuple, tuple[tuple, str]]:
    """{a BASE key NEW lacks: (NEW's key judged in its place, the words naming the pair)}: DDP as shipped and its
    stand-in (roles.reference_pairs), else the strategy at NEW's one other option setting (roles.option_pairs: 'stock
    -> stock gradient_as_bucket_view=True'), from the rows of every status, so that verdicts and what was not judged
    pair alike; none across strategies, where options are not matched."""
    if "impl_options" not in keys:
        return {}
    held = [{_plain(k) for k in _configs(run)[keys].itertuples(index=False)} for run in (base_run, new_run)]
    i, o = keys.index("impl"), keys.index("impl_options")
    options = {key: (found, f"{configuration_label(key[i], key[o])} -> {configuration_label(found[i], found[o])}")
               for key, found in roles.option_pairs(*held, keys).items()}  # fmt: skip
    shipped = {
        key: (found, roles.paired_words(key, found, keys)) for key, found in roles.reference_pairs(*held, keys).items()
    }
    return {**options, **shipped}


def _paired(words: str, base: pd.DataFrame, new: pd.DataFrame) -> dict:
    """{"paired": the pair's words (_stand_ins), with each side's first bucket where both recorded different ones}."""
    firsts = [rows["first_bucket_cap_mb"].dropna() for rows in (base, new)]
    known = all(len(f) for f in firsts) and firsts[0].iloc[0] != firsts[1].iloc[0]
    said = f" (first bucket {firsts[0].iloc[0]:g} vs {firsts[1].iloc[0]:g} MiB)" if known else ""
    return {"paired": words + said}


def _nearest_in_new(key: tuple, new_keys: list[tuple], names: list[str], base_keys: list[tuple] = ()) -> str:
    """'not in NEW'; 'NEW has stock only at bucket_cap_mb=1, 5' (other options; where BASE's several settings kept
    this one from a pair, said); 'NEW ran it only as naive' where each run has one strategy (the baseline aside) at that
    setup, with the flag that judges it; or 'NEW ran it with dtype fp32, not bf16' (one setting changed): another
    workload or world size is another configuration, not this one."""
    if "impl_options" in names:  # (across strategies options are not matched)
        i, o = names.index("impl"), names.index("impl_options")
        if others := [k[o] for k in new_keys if k[:o] + k[o + 1 :] == key[:o] + key[o + 1 :]]:
            own = [k for k in base_keys if k[:o] + k[o + 1 :] == key[:o] + key[o + 1 :]]
            several = f"; with {len(own)} settings of it in BASE, this one is paired with none" if len(own) > 1 else ""
            return f"NEW has {key[i]} only at {settings_words(others)}{several}"
        if across := _across_only(key, new_keys, base_keys, i, o):
            return f"NEW ran it only as {across}; compare --across-strategies judges one strategy against another"
    for other in new_keys:
        differs = [i for i, (a, b) in enumerate(zip(key, other, strict=True)) if a != b]
        if len(differs) == 1 and names[differs[0]] not in ("impl", "impl_options", "workload", "world_size"):
            i = differs[0]
            return f"NEW ran it with {names[i]} {other[i]}, not {key[i]}"
    return "not in NEW"


def _across_only(key: tuple, new_keys: list[tuple], base_keys: list[tuple], i: int, o: int) -> str:
    """NEW's one strategy at `key`'s setup where BASE too has one there, the baseline aside (what --across-strategies
    would pair, and refuses for several); '' otherwise."""

    def strategies(keys: list[tuple]) -> set[str]:
        same = (k for k in keys if all(k[j] == key[j] for j in range(len(key)) if j not in (i, o)))
        return {k[i] for k in same} - {roles.baseline_name()}

    own, theirs = strategies(base_keys), strategies(new_keys)
    return next(iter(theirs)) if len(own) == len(theirs) == 1 and own != theirs else ""


def without_counterpart(base_run: Path, new_run: Path, *, across_strategies: bool = False):
    """BASE's ok configurations that NEW cannot vouch for, a line each: (failed in NEW, no ok result in NEW).

    A configuration that failed in NEW (in any repeat) where BASE measured it is a regression a gate
    must catch; one NEW did not run, skipped, or ran with other keys (a dtype, a batch) is no evidence, nor is one
    NEW says ok of whose steps no part could be read (a copy cut short, another tool's file: named where skipped).
    Such a configuration of BASE, the evidence every verdict is held against, is bad input (ConfigError).
    """
    keys = match_keys(across_strategies=across_strategies)
    base = _configs(base_run, across_strategies=across_strategies)
    new = _configs(new_run, across_strategies=across_strategies)
    with_steps = set(store.read_steps(new_run)["config_id"])  # read once a process (store._PARTS_READ)
    base_steps = set(store.read_steps(base_run)["config_id"])
    new_groups = {_plain(k): g for k, g in new.groupby(keys, dropna=False)} if not new.empty else {}
    stand_ins, failed, missing = _stand_ins(base_run, new_run, keys), [], []
    for key, group in base[base["status"] == "ok"].groupby(keys, dropna=False):
        label = _label({**dict(zip(keys, key, strict=True)), "impl": group["impl"].iloc[0]})
        if not base_steps & set(group["config_id"]):  # else it drops out of the gate unsaid
            raise ConfigError(f"BASE {base_run.name!r}: no steps of {label} can be read ({base_run}/steps); give a "
                              "whole copy of BASE, or another BASE run")  # fmt: skip
        found, words = stand_ins.get(_plain(key), (_plain(key), ""))
        label += f" ({words})" if words else ""
        counterpart = new_groups.get(found)
        statuses = counterpart["status"] if counterpart is not None else pd.Series(dtype=str)
        if (statuses == "failed").any():
            error = counterpart.loc[statuses == "failed", "error"].iloc[0]
            failed.append(f"{label}: failed in NEW ({(statuses == 'failed').sum()} of "
                          f"{stats.repeats_text(len(statuses))}): {error}")  # fmt: skip
        elif not (statuses == "ok").any():
            base_keys = [_plain(k) for k in base.groupby(keys, dropna=False).groups]
            why = (_nearest_in_new(_plain(key), list(new_groups), keys, base_keys) if counterpart is None
                   else f"{', '.join(sorted(set(statuses)))} in NEW")  # fmt: skip
            if why == "not in NEW" and not (new_run / SUMMARY_JSON).exists():  # a run still going: not yet, not never
                why = "not yet run"
            missing.append(f"{label}: not compared, no ok result in NEW ({why})")
        elif not with_steps & set(counterpart.loc[statuses == "ok", "config_id"]):
            missing.append(f"{label}: not compared, no ok result in NEW (its steps unreadable: {new_run}/steps)")
    return failed, missing


def only_in_new(base_run: Path, new_run: Path, *, across_strategies: bool = False) -> list[str]:
    """'w2 gpt2/small fsdp': NEW's ok configurations that BASE has no ok result to judge against (its stand-in
    counted): `without_counterpart` walks BASE only, and a strategy NEW adds went unmentioned."""
    keys = match_keys(across_strategies=across_strategies)
    base = _configs(base_run, across_strategies=across_strategies)
    new = _configs(new_run, across_strategies=across_strategies)
    if new.empty:
        return []
    stand_ins = _stand_ins(base_run, new_run, keys)
    held = base[base["status"] == "ok"] if not base.empty else base
    covered = (
        {stand_ins.get(_plain(k), (_plain(k),))[0] for k in held.groupby(keys, dropna=False).groups}
        if len(held)
        else set()
    )
    return [_label({**dict(zip(keys, key, strict=True)), "impl": group["impl"].iloc[0]})
            for key, group in new[new["status"] == "ok"].groupby(keys, dropna=False)
            if _plain(key) not in covered]  # fmt: skip


def setup_words(keys: dict) -> str:
    """'mlp/tiny fp32 sgd batch 8': a setup as the console and the pages name it."""
    batch = keys.get("batch_size")
    words = [f"{keys.get('workload')}/{keys.get('size')}", str(keys.get("dtype") or ""),
             str(keys.get("optimizer") or ""),
             "" if batch is None or pd.isna(batch) else f"batch {int(batch)}"]  # fmt: skip
    return " ".join(w for w in words if w)


def family_confidence(judged: int, *, alpha: float = 1 - stats.CONFIDENCE) -> float:
    """Each interval's confidence where the outcome is wrong when any of `judged` verdicts is (Bonferroni): a gate
    that fails on any configuration slower must not fail identical code more often than `alpha`, however many
    configurations the two runs share."""
    return 1 - alpha / max(judged, 1)


def _leaning(judged: dict) -> str:
    """'slower' or 'faster' where the repeats are too few to tell but the interval already excludes no change (a
    walkthrough read 'ratio 1.303 (95% CI 1.042-1.629): too few repeats to tell' as a contradiction); else ''."""
    low, high = (judged["low"], judged["high"]) if judged["verdict"] == stats.TOO_FEW else (float("nan"),) * 2
    return "slower" if low > 1 else "faster" if high < 1 else ""  # NaN (one repeat, or decided): neither


def interval_level(frame: pd.DataFrame) -> str:
    """'99.2%': the confidence of a comparison's intervals (95 % where it judged one configuration, or an older
    comparison without the column)."""
    level = frame["confidence"].iloc[0] if "confidence" in frame and len(frame) else stats.CONFIDENCE
    digits = next(d for d in range(3, 9) if not f"{level * 100:.{d}g}".startswith("100") or d == 8)  # no '100%'
    return f"{level * 100:.{digits}g}%"


def family_words(frame: pd.DataFrame) -> str:
    """' (95% over the 6 configurations judged, Bonferroni: …)' after the level where it judged several, else ''."""
    judged = int(frame["configurations_judged"].iloc[0]) if "configurations_judged" in frame and len(frame) else 1
    alpha = (1 - stats.CONFIDENCE) * 100
    return "" if judged <= 1 else (f" ({100 - alpha:g}% over the {judged} configurations judged, Bonferroni: "
                                   f"identical code fails the gate at most {alpha:g}% of the time, however many it "
                                   "shares)")  # fmt: skip


def judge(base: pd.DataFrame, new: pd.DataFrame, *, threshold: float, confidence: float = stats.CONFIDENCE) -> dict:
    """One matched configuration: its repeat medians in each run, the verdict (its interval at `confidence`), and
    a noise note for each run whose steps are noisy, drift within the window or whose repeats disagree."""
    judged = stats.verdict(
        base["median_ms"].tolist(), new["median_ms"].tolist(), threshold=threshold,
        rel_se=float(pd.concat([base["rel_se"], new["rel_se"]]).max()), confidence=confidence,
    )  # fmt: skip
    notes = [
        f"{which}: {note}"
        for which, group in (("base", base), ("new", new))
        if (note := stats.repeats_noise_note(group.to_dict("records")))
    ]
    return {
        "impl": _strategy_label(base, new), "configuration": _configuration(base, new),
        "impl_options": base["impl_options"].iloc[0],
        "base_ms": stats.geometric_mean(base["median_ms"]),
        "new_ms": stats.geometric_mean(new["median_ms"]),
        "base_repeats": len(base), "new_repeats": len(new),
        "ratio": judged["ratio"], "ratio_ci_low": judged["low"], "ratio_ci_high": judged["high"],
        "p_value": judged["p_value"], "verdict": judged["verdict"], "confidence": confidence,
        "repeats_needed": judged["repeats_needed"], "noise": "; ".join(notes), "leaning": _leaning(judged),
    }  # fmt: skip


def comparison_name(base: str, new: str) -> str:
    """'a → b': a comparison as every page and line names it, BASE first as `compare BASE NEW` takes the runs and as
    its file BASE_vs_NEW.html names them (its ratios are NEW / BASE)."""
    return f"{base} → {new}"
