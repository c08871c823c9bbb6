"""Regenerate the verifiers package's committed example run: ``environments/shopsim_env/outputs/heuristic``.

    .venv-verifiers/bin/python scripts/vf_example_outputs.py [--data data/default] [--policy heuristic]

One command after a catalog change: builds the default catalog at ``--data`` when it is missing, serves the
built-in policy as an OpenAI-compatible model (``shopsimrl policy-server``), and runs ``vf-eval`` with the
package's own defaults (``configs/eval.toml``: 5 test tasks x 3 rollouts, 8 in flight, no push) into
``outputs/<policy>`` (replaced). ``tests/test_verifiers_outputs.py`` checks what it wrote.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "environments" / "shopsim_env"
OUTPUTS = PACKAGE / "outputs"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the policy server exited before it was ready")
        try:
            if httpx.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the policy server was not ready in time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/default",
                        help="data directory, relative to the repository root (default: data/default; built if absent)")
    parser.add_argument("--policy", default="heuristic", help="built-in policy to serve (default: heuristic)")
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    shopsimrl, vf_eval = str(bin_dir / "shopsimrl"), str(bin_dir / "vf-eval")
    if not (ROOT / args.data / "manifest.json").is_file():
        subprocess.run([shopsimrl, "data", "build-default", "--out", args.data], cwd=ROOT, check=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([shopsimrl, "policy-server", "--data", args.data, "--policy", args.policy,
                               "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(url, server)
        command = [vf_eval, "@", str(PACKAGE / "configs" / "eval.toml"), "--env.taskset.data", args.data,
                   "-m", f"shopsim-{args.policy}", "--client.base-url", f"{url}/v1", "--run.name",
                   f"shopsim-env--{args.policy}", "--run.dir", args.policy, "-o", str(OUTPUTS.relative_to(ROOT)),
                   "--clean", "--no-rich"]
        done = subprocess.run(command, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": "EMPTY"})
    finally:
        server.terminate()
        server.wait(timeout=30)
    latest = OUTPUTS / args.policy / "logs" / "latest"
    if latest.is_symlink():  # verifiers' pointer to the last attempt: a link would make the tree unportable
        latest.unlink()
    print(f"wrote {OUTPUTS / args.policy}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
