"""Custom kernels of the built-in workloads (GPU-MODE lecture 1 and faster versions).

- triton_mean: lecture_mean (one program per row) and fast_mean (persistent, one launch)
- triton_square: triton_square
- cuda_square: lecture_square and fast_square, built with torch's load_inline
- numba_square: numba_square (numba.cuda on torch's stream; the CUDA simulator on a CPU)

Importing this package or its modules imports neither torch, triton nor numba: each function
imports what it needs on first call.
"""
