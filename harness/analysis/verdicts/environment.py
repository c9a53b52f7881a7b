"""What two runs' environments differ in, said as `compare`'s warnings: provenance (GPU, driver, versions, the
settings that change GPU numbers), environment variables, world sizes, steps and warm-up; a fault a run injected on
purpose, which its pages and any comparison of it name."""

from __future__ import annotations

from typing import Any

ENVIRONMENT_KEYS = (
    "gpu_name", "driver_version", "torch_version", "nccl_version", "cpu_model", "hostname", "usable_cpus",
    # What changes GPU numbers without changing the code (a run from before they were recorded: "not recorded").
    "float32_matmul_precision", "tf32_matmul", "tf32_cudnn", "cudnn_benchmark", "cudnn_deterministic",
    "cudnn_enabled", "allocator_conf", "gpu_clocks", "gpu_power_limit_w", "gpu_ecc", "gpu_mig",
)  # fmt: skip


UNJUDGED_ENV_VARS = ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")
"""Distributed environment variables that differ between any two launches and change no timing."""

FAULT_VARIABLE = "DDPBENCH_FAULT"
"""A fault injected on purpose (docs/faults.md): a rank held, killed, made to raise."""


def injected_fault(meta: dict) -> str:
    """'slow:impl=stock,world=2,ms=1500': the DDPBENCH_FAULT a run recorded in run.json, at its start or in a
    session that resumed it (`sessions`), '' where none. A variable left set in CI makes a run whose verdicts are
    the fault's: its console, pages and comparisons say so."""
    variables = (meta.get("environment") or {}).get("env_vars") or {}
    recorded = [variables.get(FAULT_VARIABLE), *(s.get("fault") for s in meta.get("sessions") or [])]
    return next((str(fault).strip() for fault in recorded if str(fault or "").strip()), "")


def session_faults(meta: dict) -> list[tuple[float, str]]:
    """(start as a POSIX time, its DDPBENCH_FAULT or '') of each session of the run, first to last (run.json's
    `sessions`; the first's fault is its environment's); a start not recorded reads as 0 (before every launch)."""
    import datetime

    sessions = meta.get("sessions") or [{"started_at": meta.get("started_at")}]
    first = ((meta.get("environment") or {}).get("env_vars") or {}).get(FAULT_VARIABLE)
    said = []
    for k, session in enumerate(sessions):
        try:
            start = datetime.datetime.fromisoformat(str(session.get("started_at"))).timestamp()
        except ValueError:
            start = 0.0
        said.append(
            (start, str((first if k == 0 and not session.get("fault") else session.get("fault")) or "").strip())
        )
    return said


def targets(fault: str, configuration: dict) -> bool:
    """Whether `fault` (a DDPBENCH_FAULT, checked when its run began: KIND[:CONDITION=VALUE,…], ';' between several)
    could fire in `configuration` (run.json's), read as the ranks read it (`FaultRule`): its strategy, world size,
    repeat and cap match, it has the rank (rpc_hybrid's server counted), and the step falls within its warm-up and
    steps (a server counts forward calls, not steps); a `slow` fault never holds the baseline. What the
    configuration does not record picks it, as does a fault this ddpbench cannot read: neither can be told apart."""
    from harness.analysis import roles
    from harness.config.faults import FaultRule

    for text in filter(None, (part.strip() for part in fault.split(";"))):
        try:
            rule = FaultRule.parse(text)
        except ValueError:
            return True
        if rule.kind == "slow" and configuration.get("impl") == roles.baseline_name():
            continue
        if _could_fire(rule, configuration):
            return True
    return False


def _could_fire(rule, configuration: dict) -> bool:
    """FaultRule.applies at some rank and step of the configuration (its unrecorded conditions taken as asked)."""
    recorded = {"impl": configuration.get("impl"), "world": configuration.get("world_size"),
                "repeat": configuration.get("repeat"),
                "cap": (configuration.get("impl_options") or {}).get("bucket_cap_mb")}  # fmt: skip
    site = {key: getattr(rule, key) if value is None else value for key, value in recorded.items()}
    if not rule.applies(**site, rank=rule.rank, step=rule.step):
        return False
    world, steps, warmup = (configuration.get(key) for key in ("world_size", "steps", "warmup"))
    if world is not None and rule.rank >= world + (configuration.get("extra_ranks") or 0):
        return False  # no such rank: 'slow:rank=1' at world size 1
    trains = world is None or rule.rank < world  # a parameter server's "steps" are its forward calls
    return not (trains and steps is not None and rule.step >= steps + (warmup or 0))


def fault_rows(meta: dict, launches: list[dict] | None) -> list[str] | None:
    """The configurations whose latest launch (`launches`: plan/*.contention.json's records, harness.results.
    contention.read) came in a session with a fault set that `targets` them: the rows an injected fault's mark is of
    (a fault on stock at 2 ranks marks those rows, not the run's every row). A retry without the fault measures its
    rows again: they are no longer the fault's. None where the run kept no launch records (a run from before them):
    the whole run is then marked, as before."""
    if not launches:
        return None
    recorded = {c.get("config_id"): c for c in meta.get("configurations") or []}
    latest: dict[str, float] = {}
    for record in sorted(launches, key=lambda r: r.get("started_at") or 0.0):
        latest.update(dict.fromkeys(record.get("configurations") or [], record.get("started_at") or 0.0))
    sessions = session_faults(meta)
    # a launch belongs to the last session begun before it (run.json's start is to the second: 1 s of slack)
    faults = {cid: next((f for start, f in reversed(sessions) if start <= at + 1.0), sessions[0][1])
              for cid, at in latest.items()}  # fmt: skip
    return sorted(cid for cid, fault in faults.items() if fault and targets(fault, recorded.get(cid) or {}))


def kept_fault(meta: dict) -> str:
    """injected_fault, where a row the run keeps ran under it (`fault_configs`, fault_rows as the reader of the run
    recorded it): '' where every row measured with the fault set was measured again without it."""
    rows = meta.get("fault_configs")
    return "" if rows is not None and not rows else injected_fault(meta)


def fault_share(meta: dict) -> str:
    """'on the 6 of 8 configurations it targeted' where the reader recorded which rows ran with it aimed at them
    (`fault_configs`); '' where it did not (the whole run is the fault's)."""
    rows = meta.get("fault_configs")
    if not rows:
        return ""
    return f"on the {len(rows)} of {len(meta.get('configurations') or rows)} configurations it targeted"


def fault_words(fault: str, *, rows: bool = False) -> str:
    """ "DDPBENCH_FAULT='…' (docs/faults.md): its times and verdicts are the fault's, not the code's", as every place
    that names an injected fault says it; `rows`: of the rows fault_share counted, not the whole run."""
    whose = "those rows' times, and the verdicts resting on them," if rows else "its times and verdicts"
    return f"{FAULT_VARIABLE}={fault!r} (docs/faults.md): {whose} are the fault's, not the code's"


def _comparable(key: str, value):
    """What of a provenance value must match: a GPU's application clocks, not its current ones."""
    if key == "gpu_clocks" and isinstance(value, list):
        return [{k: v for k, v in (c or {}).items() if "current" not in k} for c in value]
    return value


def _recorded(env: dict, key: str) -> str:
    return repr(_comparable(key, env[key])) if key in env else "not recorded"


def environment_differences(base_meta: dict, new_meta: dict) -> list[str]:
    """A line per provenance value that differs (one recorded by only one run says 'not recorded')."""
    base_env, new_env = base_meta.get("environment", {}), new_meta.get("environment", {})
    notes = [
        f"{key} differs: {_recorded(base_env, key)} vs {_recorded(new_env, key)}"
        for key in ENVIRONMENT_KEYS
        if (key in base_env or key in new_env)
        and _comparable(key, base_env.get(key)) != _comparable(key, new_env.get(key))
    ]
    base_vars, new_vars = base_env.get("env_vars") or {}, new_env.get("env_vars") or {}
    notes += [
        f"environment variable {name} differs: {base_vars.get(name)!r} vs {new_vars.get(name)!r}"
        for name in sorted((set(base_vars) | set(new_vars)) - {*UNJUDGED_ENV_VARS, FAULT_VARIABLE})
        if base_vars.get(name) != new_vars.get(name)
    ]
    for which, meta in (("BASE", base_meta), ("NEW", new_meta)):  # said of each run, the same fault in both too
        if fault := kept_fault(meta):
            share = f" ({fault_share(meta)}: {', '.join(meta['fault_configs'])})" if fault_share(meta) else ""
            notes.append(f"{which} ({meta.get('run_id')}) ran with a fault injected on purpose{share}: "
                         f"{fault_words(fault, rows=bool(share))}")  # fmt: skip
    worlds = [sorted({c["world_size"] for c in meta.get("configurations", [])}) for meta in (base_meta, new_meta)]
    if worlds[0] != worlds[1]:
        notes.append(f"world sizes differ: {worlds[0]} vs {worlds[1]}")
    for key in MEASURING_KEYS:  # how long each configuration was measured: a median of 5 steps is not one of 30
        base, new = (_per_strategy(meta, key) for meta in (base_meta, new_meta))
        differing = [f"{impl} {base[impl]} vs {new[impl]}".strip() for impl in base
                     if impl in new and base[impl] != new[impl]]  # fmt: skip
        if differing:
            notes.append(f"--{key} differs: {', '.join(differing)} (each repeat's median is over its steps)")
    return notes


def _per_strategy(meta: dict, key: str) -> dict[str, Any]:
    """{strategy: its configurations' `key`} as the run planned them (a strategy's own warm-up may differ from
    the run's --warmup: StrategyDefaults.warmup_needed); the run's flag where its configurations lack it (under
    '' where they do not name their strategy)."""
    flag = (meta.get("config") or {}).get(key)
    values = {c.get("impl") or "": c.get(key, flag) for c in meta.get("configurations") or [{}]}
    return {impl: value for impl, value in values.items() if value is not None}


MEASURING_KEYS = ("steps", "warmup")
