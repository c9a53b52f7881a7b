"""`ddpbench list` counts each workload's parameters per size once, and keeps them in the user's cache for the
workload's code and the libraries that build it: the second listing builds no model."""

from __future__ import annotations

from harness.commands import info


def test_the_counts_are_kept_until_the_workloads_code_or_libraries_change(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    counted = []
    real = info.parameter_count
    monkeypatch.setattr(info, "parameter_count", lambda *args: counted.append(1) or real(*args))

    def listed() -> str:  # as run_list reads and writes the cache around its lines
        counts = info._read_counts()
        line = info._sizes_line("mlp", counts)
        info._write_counts(counts)
        return line

    first = listed()
    assert first.startswith("tiny ") and len(counted) == 3  # every size, counted
    assert (tmp_path / "ddpbench" / "parameter-counts.json").is_file()
    assert listed() == first and len(counted) == 3  # from the cache: no model built
    monkeypatch.setattr(info, "_counts_key", lambda cls: "another torch")
    assert listed() == first and len(counted) == 6  # another key: counted again
    (tmp_path / "ddpbench" / "parameter-counts.json").write_text("{not json")
    assert listed() == first and len(counted) == 9  # a broken cache is only slower
