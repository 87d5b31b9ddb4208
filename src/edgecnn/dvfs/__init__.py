"""Seed 001's scene-aware frequency governor (chapter 5): frequency control over Linux cpufreq and
devfreq with every change undone (on exit, on SIGINT/SIGTERM and after a crash), read-only NVIDIA
clock queries, DTW scene classification of the 50 ms load trace, the governor daemon (Algorithm
5.1), frequency sweeps (Table 5.1) and a simulator that replays recorded traces under the default
governor, fixed frequencies and Algorithm 5.1 where no frequency can be set."""
