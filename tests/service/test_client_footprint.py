"""The client SDK runs on users' devices: importing it must not pull in the server-side stack.

Guards the modules imported (deterministic), not the time or memory (machine-dependent). Each
check runs in a fresh interpreter, since this test process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Server-side or analysis-only packages; none is needed to encode, seal and queue a report.
HEAVY = ("scipy", "matplotlib", "sqlalchemy", "fastapi", "uvicorn", "pandas", "starlette",
         "shuffledp.accounting", "shuffledp.shuffle", "shuffledp.central", "shuffledp.pipeline")


def _loaded_after(code: str) -> list[str]:
    """Top-level names from HEAVY present in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps(sorted(h for h in {HEAVY!r} if h in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_client_import_pulls_no_server_stack() -> None:
    assert _loaded_after("import shuffledp.service.client") == []


def test_client_import_defers_httpx_until_a_client_is_built() -> None:
    # httpx imports its command-line extras (rich, click) when present; the SDK imports it in
    # ShuffleDPClient (or not at all when the caller passes its own transport)
    assert "httpx" not in json.loads(subprocess.run(
        [sys.executable, "-c", "import sys, json, shuffledp.service.client; print(json.dumps(list(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=120).stdout)


@pytest.mark.parametrize("name", ["grr", "sue", "oue", "rappor", "blh", "olh", "hr", "ss", "cms", "hcms",
                                  "l_grr", "l_oue", "loloha", "dbitflip"])
def test_frequency_report_encoding_pulls_no_server_stack(name: str) -> None:
    # what the SDK does on the device for a frequency task: build the task's mechanism from its
    # configuration, randomize a value and lay the reports out as the plaintext
    code = ("import numpy as np\n"
            "from shuffledp.service.config import build_mechanism\n"
            "from shuffledp.service.wire import PlaintextSchema\n"
            f"m = build_mechanism({{'kind': 'frequency', 'name': {name!r}, 'epsilon': 1.0, 'params': {{'d': 64}}}})\n"
            "PlaintextSchema.from_reports(m.randomize(np.arange(5), np.random.default_rng(0)))")
    assert _loaded_after(code) == []


def test_estimate_confidence_interval_still_works() -> None:
    # Estimate.ci imports scipy.stats when called (not when shuffledp.core is imported)
    import numpy as np

    from shuffledp.core import Estimate, PrivacyStatement

    est = Estimate(np.array([0.5]), np.array([0.1]), 100, PrivacyStatement(1.0, 0.0, "local"))
    lo, hi = est.ci(0.95)
    assert lo[0] == pytest.approx(0.5 - 1.959963984540054 * 0.1)
    assert hi[0] == pytest.approx(0.5 + 1.959963984540054 * 0.1)
