"""Helpers for end-to-end tests: run the real toposched binary and parse what it prints."""
import json
import os
import subprocess
import tempfile

BINARY = os.environ.get("TOPOSCHED", "build/debug/toposched")
SOURCE_DIR = os.environ.get("TOPOSCHED_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run(*args, check=True, timeout=300):
    """Runs toposched with args; returns CompletedProcess (text). check: require exit 0."""
    proc = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"toposched {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def run_json(*args):
    return json.loads(run(*args, "--format", "json").stdout)


def temp_dir():
    return tempfile.TemporaryDirectory(prefix="toposched-e2e-")
