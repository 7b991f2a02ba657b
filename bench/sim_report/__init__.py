"""bench/sim-report's modules: load (the run directory), stats, plots, page (HTML), report, compare."""
