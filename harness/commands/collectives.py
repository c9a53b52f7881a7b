"""`ddpbench collectives`: validate the flags, launch the microbenchmarks, print the bandwidth table.
Exit 1 when a collective gave a wrong result.
"""

from __future__ import annotations

import argparse

from harness.commands import console
from harness.plan.config import DEVICES, ConfigError


def collectives_config(args: argparse.Namespace, *, command: tuple[str, ...]):
    """Validate everything before anything is written: the config and the resolved device."""
    import torch

    from harness.plan import config as cfgmod
    from harness.rank import collectives

    for flag, value, choices in (("--device", args.device, DEVICES), ("--backend", args.backend, cfgmod.BACKENDS)):
        if value not in choices:
            raise ConfigError(f"{flag} {value!r} is not valid; choose one of {', '.join(choices)}")
    device = cfgmod.resolve_device(args.device, cuda_available=torch.cuda.is_available())
    backend = cfgmod.resolve_backend(args.backend, device=device)
    gpus = args.gpus if args.gpus is not None else (torch.cuda.device_count() if device == "cuda" else 2)
    if device == "cuda":
        cfgmod.check_gpu_count(gpus=gpus, available=torch.cuda.device_count(), backend=backend)
    config = collectives.CollectivesConfig(
        gpus=gpus,
        ops=collectives.parse_ops(args.ops),
        sizes=collectives.parse_size_range(args.sizes or collectives.DEFAULT_SIZES[device]),
        iters=args.iters if args.iters is not None else collectives.DEFAULT_ITERS[device],
        warmup=args.warmup if args.warmup is not None else collectives.DEFAULT_WARMUP[device],
        device=device,
        backend=backend,
        results=args.results,
        run_id=args.run_id,
        command=command,
    )
    run_id = config.run_id or cfgmod.new_run_id()
    cfgmod.check_results_folder(config.results, run_id)
    return config, run_id


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.rank import collectives, env
    from harness.results import store

    config, run_id = collectives_config(args, command=command)
    console.say(f"ddpbench: collectives {','.join(config.ops)} on {config.device} with {config.backend}, "
                f"world sizes {config.world_sizes}, {config.iters} iterations per size -> "
                f"{config.results / run_id}/collectives/")  # fmt: skip
    try:
        folder = collectives.launch(config, run_id=run_id, environment=env.capture(config.command))
    except collectives.LaunchFailed as exc:
        console.error(str(exc))
        return 1
    frame = store.read_collectives(folder.parent)
    console.collectives_table(frame, store.read_contention(folder.parent))
    console.say(f"collectives: {folder}/")
    return 0 if frame["correct"].all() else 1
