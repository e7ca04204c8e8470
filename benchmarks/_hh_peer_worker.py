"""Runs one pure-ldp heavy-hitter case (executed by the peers' own virtualenv).

argv: method (PEM|SFP|TreeHist), words file (one word per line), epsilon, k, max_length.
Prints one JSON line: labels (found words, best first), client_s, server_s (wall clock),
client_cpu_s, server_cpu_s (``time.process_time``), n.
Configuration as in pure-ldp's own paper experiments (Cormode, Maddock, Maple, PVLDB 2021):
CMS frequency oracle (k=32 rows, m=1024 columns), fragment_length = start_length = 2, top-k mode.
"""

from __future__ import annotations

import json
import string
import sys
import time


def main() -> None:
    method, path, eps, k, max_length = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    from pure_ldp.core.fo_creator import create_fo_client_instance, create_fo_server_instance
    from pure_ldp.core.hh_creator import create_hh_client_instance, create_hh_server_instance

    words = [w.strip() for w in open(path) if w.strip()]
    # pure-ldp's SFPServer.find_heavy_hitters calls alphabet.add (it needs a set); the others take a list
    alphabet = set(string.ascii_lowercase) if method == "SFP" else list(string.ascii_lowercase)
    cms = {"m": 1024, "k": 32, "epsilon": eps}
    ident = lambda x: x  # noqa: E731  (strings are indexed as themselves, as in PureHHSimulation)
    params = {"epsilon": eps, "max_string_length": max_length, "fragment_length": 2, "start_length": 2,
              "alphabet": alphabet, "index_mapper": ident}
    server_fo = create_fo_server_instance("cms", dict(cms))
    client_params = dict(cms)
    client_params["hash_funcs"] = server_fo.get_hash_funcs()
    client_fo = create_fo_client_instance("cms", client_params)
    t0, c0 = time.perf_counter(), time.process_time()
    client = create_hh_client_instance(method, {**params, "fo_client": client_fo})
    reports = [client.privatise(w) for w in words]
    t1, c1 = time.perf_counter(), time.process_time()
    server = create_hh_server_instance(method, {**params, "fo_server": server_fo})
    for r in reports:
        server.aggregate(r)
    found, freqs = server.find_heavy_hitters(k=k)
    t2, c2 = time.perf_counter(), time.process_time()
    pairs = sorted(zip(found, freqs), key=lambda p: -p[1])
    print(json.dumps({"labels": [str(w).split("*")[0] for w, _ in pairs], "client_s": t1 - t0, "server_s": t2 - t1,
                      "client_cpu_s": c1 - c0, "server_cpu_s": c2 - c1, "n": len(words)}))


if __name__ == "__main__":
    main()
