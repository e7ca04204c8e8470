import pytest


@pytest.fixture(autouse=True, scope="package")
def _one_blas_thread():
    """BLAS/OpenMP thread pools oversubscribe the shared 2-core machine (L-BFGS fits ran 30x slower)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1):
        yield
