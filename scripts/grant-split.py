#!/usr/bin/env python3
"""Where one client's grant spends its time on a lock-server.

One session, one key, one connection: L4 acquire then L6 release, in a loop,
for WINDOW seconds after a 1 s warm-up. Prints one JSON line: grants/s, the
client's mean L4 and L6 round trips, and, from the server's own /metrics
over the same window, the mean L4 answer (`lock_grant_duration_seconds`:
request received to answer ready) and the mean store transaction
(`lock_store_commit_duration_seconds`), with store transactions per grant.
The client is Python (http.client): its own overhead is in the client
columns only, never in the server's.

    scripts/grant-split.py HOST PORT WINDOW_SECONDS
"""
import http.client
import json
import re
import sys
import time


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    host, port, window = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    conn = http.client.HTTPConnection(host, port)

    def req(method, path, body=None):
        t = time.perf_counter()
        headers = {"content-type": "application/json"} if body is not None else {}
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, data, time.perf_counter() - t

    def metrics():
        status, data, _ = req("GET", "/metrics")
        if status != 200:
            sys.exit(f"grant-split: GET /metrics answered {status}")
        out = {}
        for name in ["lock_store_commit_duration_seconds", "lock_grant_duration_seconds"]:
            for part in ["sum", "count"]:
                m = re.search(rf"^{name}_{part} ([0-9.e+-]+)$", data.decode(), re.M)
                if not m:
                    sys.exit(f"grant-split: /metrics has no {name}_{part} (is the store durable?)")
                out[f"{name}_{part}"] = float(m.group(1))
        return out

    status, data, _ = req("POST", "/v1/sessions", {"owner_id": "grant-split", "ttl_ms": 600000})
    if status != 201:
        sys.exit(f"grant-split: L1 answered {status}: {data!r}")
    sid = json.loads(data)["session_id"]
    key = f"grant-split-{sid}"

    def grant():
        status, data, l4 = req("POST", f"/v1/locks/{key}/acquire", {"session_id": sid})
        if status != 200:
            sys.exit(f"grant-split: L4 answered {status}: {data!r}")
        token = json.loads(data)["token"]
        status, data, l6 = req("POST", f"/v1/locks/{key}/release", {"session_id": sid, "token": token})
        if status != 204:
            sys.exit(f"grant-split: L6 answered {status}: {data!r}")
        return l4, l6

    warm = time.perf_counter() + 1
    while time.perf_counter() < warm:
        grant()
    before = metrics()
    n, l4_sum, l6_sum = 0, 0.0, 0.0
    start = time.perf_counter()
    while time.perf_counter() < start + window:
        l4, l6 = grant()
        n, l4_sum, l6_sum = n + 1, l4_sum + l4, l6_sum + l6
    elapsed = time.perf_counter() - start
    after = metrics()
    d = {k: after[k] - before[k] for k in after}
    tx = d["lock_store_commit_duration_seconds_count"]
    print(json.dumps({
        "grants_per_s": round(n / elapsed, 1),
        "client_l4_ms": round(1000 * l4_sum / n, 4),
        "client_l6_ms": round(1000 * l6_sum / n, 4),
        "server_l4_ms": round(1000 * d["lock_grant_duration_seconds_sum"] / d["lock_grant_duration_seconds_count"], 4),
        "store_commit_ms": round(1000 * d["lock_store_commit_duration_seconds_sum"] / tx, 4),
        "store_tx_per_grant": round(tx / n, 3),
    }))


if __name__ == "__main__":
    main()
