"""Pipeline stages, one module each (probe, sample, keyframes, geometry, decode, quality, signals,
score, group, select, pack): a pure function over records and a frozen config."""
