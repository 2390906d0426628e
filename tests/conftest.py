import os

# Keep BLAS to one thread so the twin's own threads and pytest do not oversubscribe the 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: Ray Train jobs (tens of seconds); still part of the default run")
