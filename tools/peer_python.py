"""Checking the Python of a peer's virtualenv (Reverb, Stable-Baselines3, RLlib) before a
side-by-side comparison tool runs it: the peers are not dependencies of this project."""
import os
import subprocess
from typing import Optional


def peer_unavailable(python: Optional[str], imports: str, flag: str) -> Optional[str]:
    """Why `python` cannot run `import <imports>` (None when it can); `flag` is the option that
    passes it, named in the reason."""
    if not python:
        return f"no {flag} given"
    if not os.path.exists(python):
        return f"{python} does not exist"
    try:
        probe = subprocess.run([python, "-c", f"import {imports}"], capture_output=True,
                               text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python} cannot be run: {e}"
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return f"`import {imports}` fails with {python}: {lines[-1] if lines else probe.returncode}"
    return None
