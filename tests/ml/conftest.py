import sys

import pytest


@pytest.fixture(autouse=True, scope="package")
def _one_blas_thread():
    """BLAS/OpenMP and torch thread pools oversubscribe the shared 2-core machine (L-BFGS fits ran
    30x slower); every test here runs on one thread. Nothing is skipped when threadpoolctl is absent."""
    torch = sys.modules.get("torch")  # imported at collection by the modules that need it
    before = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
    else:
        with threadpool_limits(1):
            yield
    if torch is not None:
        torch.set_num_threads(before)
