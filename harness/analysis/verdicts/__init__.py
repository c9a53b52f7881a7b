"""The verdicts a run is for: the recommended bucket cap per strategy and world size (`sweep`), two runs' matched
configurations judged (`compare`), and which verdicts `--repeats auto` has decided (`decide`)."""
