import os

# Keep BLAS to one thread so the twin's own threads and pytest do not oversubscribe the 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
