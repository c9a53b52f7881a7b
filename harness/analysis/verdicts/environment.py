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


def fault_words(fault: str) -> str:
    """ "DDPBENCH_FAULT='…' (docs/faults.md): its times and verdicts are the fault's, not the code's", as every place
    that names an injected fault says it."""
    return f"{FAULT_VARIABLE}={fault!r} (docs/faults.md): its times and verdicts are the fault's, not the code's"


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
        if fault := injected_fault(meta):
            notes.append(f"{which} ({meta.get('run_id')}) ran with a fault injected on purpose: {fault_words(fault)}")
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
