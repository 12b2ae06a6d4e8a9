"""The server a CI array task starts on its node (DSV4_SERVER_CMD of the Slurm recipe).

The embedded sim, capacity layout, on the port and with its receipt in the folder its
command line names: `sim_server.py PORT RECEIPTS`, given as `$DSV4_SERVER_PORT
$DSV4_RECEIPTS` in DSV4_SERVER_CMD, which the task expands (the task's own port and
folder), as the patched vLLM would be. On the node
named in DSV4_TEST_KILL_NODE the server dies in the middle of a round: once it is
serving requests it is killed (SIGKILL), as a crashed server is, and not restarted.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

RUNNING = re.compile(r"^vllm:num_requests_running\{[^}]*\} (\d+(?:\.\d+)?)$", re.M)


def serving(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return False
    return any(float(v) > 0 for v in RUNNING.findall(text))


def main() -> int:
    port, receipts = sys.argv[1:3]
    if not port.isdigit() or "$" in receipts:
        print(f"sim_server: not expanded: {sys.argv[1:3]}", file=sys.stderr, flush=True)
        return 2
    sim = subprocess.Popen([sys.executable, "-m", "loadgen", "sim", "--layout", "capacity",
                            "--port", port, "--receipts-dir", receipts])
    signal.signal(signal.SIGTERM, lambda *_: (sim.terminate(), sys.exit(0)))
    if os.environ.get("DSV4_TEST_KILL_NODE") != os.environ.get("DSV4_QUAL_HOST"):
        return sim.wait()
    while sim.poll() is None and not serving(port):
        time.sleep(0.05)
    time.sleep(0.5)
    sim.kill()
    sim.wait()
    print(f"sim_server: killed the server on {os.environ['DSV4_QUAL_HOST']} mid-round",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
