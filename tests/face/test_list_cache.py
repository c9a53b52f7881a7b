"""The meta device's counts of a model (harness.measure.meta_counts), kept in the user's cache for `list`,
`predict` and `report` alike: a count found there is the count made afresh; another workload, size, option, batch,
dtype, library version, ddpbench code or content of the user's file counts again, each kept beside the others; a cache
that cannot be read or written, or that processes write at once, costs the count again, never an error."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

import workloads
from harness.commands import info
from harness.measure import activations, meta_counts, modelinfo, pace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_workload.py"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of the test's own, and the counts made (the names of modelinfo's and pace's counts called)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    counted: list[str] = []
    for module, name in ((modelinfo, "parameter_count_on_meta"), (modelinfo, "counts_on_meta"),
                         (activations, "activations_on_meta"), (activations, "activations_computing_in"),
                         (pace, "training_flops_per_sample")):  # fmt: skip
        real = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *a, _real=real, _name=name, **k: counted.append(_name) or _real(*a, **k)
        )
    return counted


def test_the_counts_are_kept_until_the_workloads_code_or_libraries_change(cache, tmp_path, monkeypatch):
    first = info._sizes_line("mlp")
    assert first.startswith("tiny ") and len(cache) == 3  # every size, counted
    folder = tmp_path / "cache" / "ddpbench" / "meta-counts"
    assert meta_counts.cache_folder() == folder and len(list(folder.glob("*.json"))) == 3  # a file a count
    assert info._sizes_line("mlp") == first and len(cache) == 3  # from the cache: no model built
    monkeypatch.setattr(meta_counts, "_versions", lambda: {"torch": "another"})
    assert info._sizes_line("mlp") == first and len(cache) == 6  # another torch: counted again
    for entry in folder.glob("*.json"):  # as a writer killed mid-file would leave it, or a disk's fault
        entry.write_text(entry.read_text()[: entry.stat().st_size // 2])
    assert info._sizes_line("mlp") == first and len(cache) == 9  # a broken cache is only slower
    assert info._sizes_line("mlp") == first and len(cache) == 9  # and written whole again


ASKED = [  # every count the cache keeps, as list, predict and report ask it
    ("parameter_count_on_meta", lambda: meta_counts.parameters("mlp", "tiny", {})),
    ("counts_on_meta", lambda: meta_counts.counts("mlp", "tiny", {}, batch_size=2, dtype="fp32")),
    ("activations_on_meta", lambda: meta_counts.activations("mlp", "tiny", {}, batch_size=2, dtype="bf16")),
    (
        "activations_computing_in",
        lambda: meta_counts.computing_in("resnet18", "tiny", {}, batch_size=2, param_dtype="bf16"),
    ),
    ("training_flops_per_sample", lambda: meta_counts.flops("gpt2", "tiny", {})),
]


@pytest.mark.parametrize("name, ask", ASKED, ids=[name for name, _ in ASKED])
def test_a_count_from_the_cache_is_the_count_made_afresh(cache, name, ask):
    made = ask()
    counted = len(cache)
    assert cache[0] == name  # (counts_on_meta calls activations_on_meta)
    assert ask() == made and len(cache) == counted  # found: nothing counted
    fresh = _fresh(name)
    assert fresh is not None and made == fresh


def _fresh(name: str):
    """The count made now, without the cache, as JSON gives it back (a tuple a list)."""
    mlp, resnet, gpt2 = (workloads.create(spec, size="tiny") for spec in ("mlp", "resnet18", "gpt2"))
    fresh = {
        "parameter_count_on_meta": lambda: modelinfo.parameter_count_on_meta(mlp),
        "counts_on_meta": lambda: modelinfo.counts_on_meta(mlp, batch_size=2, dtype="fp32"),
        "activations_on_meta": lambda: activations.activations_on_meta(mlp, batch_size=2, dtype="bf16"),
        "activations_computing_in": lambda: activations.activations_computing_in(resnet, batch_size=2,
                                                                               param_dtype="bf16"),
        "training_flops_per_sample": lambda: {"flops_per_sample": pace.training_flops_per_sample(gpt2),
                                              "tokens_per_sample": gpt2.tokens_per_sample(), "image_size": None},
    }[name]()  # fmt: skip
    return tuple(fresh) if name == "parameter_count_on_meta" else json.loads(json.dumps(fresh))


def test_every_part_of_the_key_counts_again(cache, tmp_path, monkeypatch):
    def counts(spec="mlp", size="tiny", options=None, batch=2, dtype="fp32"):
        return meta_counts.counts(spec, size, options or {}, batch_size=batch, dtype=dtype)

    counts()
    asked = [lambda: counts(spec="resnet18"), lambda: counts(size="small"), lambda: counts(options={"classes": 7}),
             lambda: counts(batch=3), lambda: counts(dtype="bf16")]  # fmt: skip
    for k, ask in enumerate(asked, start=2):
        ask()
        assert cache.count("counts_on_meta") == k
    counts(), counts(batch=3)
    assert cache.count("counts_on_meta") == 6  # each kept beside the others
    monkeypatch.setattr(meta_counts, "_own_code", lambda: "another ddpbench")
    counts()
    assert cache.count("counts_on_meta") == 7
    monkeypatch.setattr(meta_counts, "_versions", lambda: {"transformers": "another"})
    counts()
    assert cache.count("counts_on_meta") == 8

    yours = tmp_path / "mine.py"
    shutil.copy(EXAMPLE, yours)
    spec = f"{yours}:MyModel"
    mine = counts(spec=spec, options={"width": 32})
    assert counts(spec=spec, options={"width": 32}) == mine and cache.count("counts_on_meta") == 9
    yours.write_text(yours.read_text() + "\n# edited\n")  # its content, not its name: counted again
    assert counts(spec=spec, options={"width": 32}) == mine and cache.count("counts_on_meta") == 10


def test_two_checkouts_used_in_turn_keep_their_counts_side_by_side(cache, tmp_path, monkeypatch):
    """Two checkouts of ddpbench (their workloads' code unlike), or two versions of your file, used in turn: each
    finds its own count again. One entry a question evicted the other source's, and every `list` counted again
    (~26 s for hf:gpt2 on a loaded machine here)."""

    def counts(spec="mlp", options=None):
        return meta_counts.counts(spec, "tiny", options or {}, batch_size=2, dtype="fp32")

    made = []
    for checkout in ("one checkout", "another", "one checkout", "another"):
        monkeypatch.setattr(meta_counts, "_own_code", lambda checkout=checkout: checkout)
        made.append(counts())
    assert cache.count("counts_on_meta") == 2 and made[2:] == made[:2]
    yours = tmp_path / "mine.py"
    versions = [EXAMPLE.read_text(), EXAMPLE.read_text() + "\n# edited\n"]
    for text in versions + versions:
        yours.write_text(text)
        counts(spec=f"{yours}:MyModel", options={"width": 32})
    assert cache.count("counts_on_meta") == 4


def _keep(number: int, counted: list[int]):
    """A count of its own kept for `number` (no model built: the cache's keeping alone), `counted` where it is made."""
    return meta_counts._kept("kept", f"mlp-{number}", "tiny", {}, None, None,
                             lambda: counted.append(number) or {"n": number}, made=False)  # fmt: skip


def test_counts_kept_by_two_processes_at_once_are_both_kept(cache, monkeypatch):
    """A helper saw a count it had kept vanish: each process wrote the whole cache file as it had read it, so one
    that kept its count between another's read and rename lost it. Here the second count is kept in that moment
    (inside the first's write), as another process would keep it."""
    from harness.results import files

    real = files.atomic_write

    def another_process_writes_first(path, write):
        monkeypatch.setattr(files, "atomic_write", real)
        _keep(2, [])
        real(path, write)

    monkeypatch.setattr(files, "atomic_write", another_process_writes_first)
    _keep(1, [])
    counted: list[int] = []
    assert (_keep(1, counted), _keep(2, counted)) == ({"n": 1}, {"n": 2}) and counted == []


def test_the_cache_keeps_the_entries_used_last_and_no_more(cache, monkeypatch):
    """The folder holds MOST_ENTRIES files at most: the one used least lately gives way, a count read again stays."""
    monkeypatch.setattr(meta_counts, "MOST_ENTRIES", 3)
    folder, stamped, counted = meta_counts.cache_folder(), set(), []

    def keep(number):
        kept = _keep(number, counted)
        for path in set(folder.glob("*.json")) - stamped:  # each older than the next: a clock's tick holds several
            stamped.add(path)
            os.utime(path, ns=(number * 10**9, number * 10**9))
        return kept

    for number in (0, 1, 2, 0, 3):  # 0 read again: used after 1 and 2
        keep(number)
    assert len(list(folder.iterdir())) == 3 and counted == [0, 1, 2, 3]
    assert (keep(0), keep(2), keep(3)) == ({"n": 0}, {"n": 2}, {"n": 3}) and counted == [0, 1, 2, 3]
    assert keep(1) == {"n": 1} and counted == [0, 1, 2, 3, 1]  # it gave way: counted again


def test_a_cache_that_cannot_be_written_is_only_slower(cache, tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # ddpbench/ cannot be made under it
    made = meta_counts.counts("mlp", "tiny", {}, batch_size=2, dtype="fp32")
    assert (
        meta_counts.counts("mlp", "tiny", {}, batch_size=2, dtype="fp32") == made and cache.count("counts_on_meta") == 2
    )
    assert info._sizes_line("mlp").startswith("tiny ")  # list too: said, not refused
    assert blocked.read_text() == "not a folder"


def test_every_module_a_count_runs_through_is_in_the_code_the_cache_is_keyed_by():
    """A count is kept while ddpbench's code that makes it is as it was: each harness module meta_counts calls on to
    count (modelinfo, counting, pace…) is among those hashed (`COUNTING`), so a change to one counts again. pace.py,
    whose training_flops_per_sample builds the model on the meta device for FLOPs, was left out."""
    import ast

    tree = ast.parse(Path(meta_counts.__file__).read_text())
    called = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    counting = {
        name.removeprefix("harness.").replace(".", "/") + ".py"
        for name in called
        if name.startswith("harness.measure.") and name != "harness.measure.env"
    }  # env: the versions
    assert counting and counting <= set(meta_counts.COUNTING)


def test_list_from_the_cache_reads_it_once_and_imports_no_table_or_counting_code(cache, tmp_path, monkeypatch):
    """`list` took ~30 s on a loaded machine with every count kept: it imported pandas and pyarrow (for the console's
    words), modelinfo and its flop counter (for a tuple), and read and parsed the whole cache once a count: a count
    reads its own entry's file alone, not the others'."""
    import os
    import subprocess
    import sys

    from harness import cli

    assert cli.main(["list"]) == 0  # every count kept
    reads: list[str] = []
    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self.name) or real(self, *a, **k))
    assert info._sizes_line("mlp") == info._sizes_line("mlp")
    entries = {path.name for path in meta_counts.cache_folder().glob("*.json")}
    assert len(entries) > 6 and len([name for name in reads if name in entries]) == 6  # mlp's 3 sizes, twice
    unneeded = ("pandas", "pyarrow", "harness.measure.modelinfo")
    code = (
        f"import sys; from harness import cli; cli.main(['list']); print([m for m in {unneeded} if m in sys.modules])"
    )
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})  # fmt: skip
    assert listed.stdout.splitlines()[-1] == "[]"


def test_list_says_which_model_it_counts_while_it_counts(cache, capsys, monkeypatch):
    """`list` sat 22 s silent on a busy machine: the strategies' imports, then each model's sizes counted on the meta
    device (transformers' import for bert) between two lines. Off a terminal, a part that lasts says so once."""
    import time

    from harness.commands.console import progress

    count = info.parameter_count
    monkeypatch.setattr(progress, "QUIET_S", 0.01)
    monkeypatch.setattr(info, "parameter_count", lambda *a, **k: time.sleep(0.02) or count(*a, **k))
    assert info.run_list(argparse.Namespace(names=[], wopt=None), command=()) == 0
    err = capsys.readouterr().err
    assert err.count("ddpbench list: counting mlp at each size on the meta device…\n") == 1
