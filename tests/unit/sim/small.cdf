# A small flow-size distribution for the simulator's tests (not from a measurement):
# BYTES CUMULATIVE_PROBABILITY, linear interpolation between points.
2048 0.3
8192 0.6
65536 0.9
262144 1
