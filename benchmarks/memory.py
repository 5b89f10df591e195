"""Peak memory of training steps: ember vs PyTorch, each in a fresh process.

A step's cost is how far the process's resident size peaks above where it stood once the
model and data existed (so the frameworks' import sizes do not count), over five steps. The
kernel's peak counter (VmHWM) is reset first (Linux: ``/proc/self/clear_refs``), so an earlier
transient peak cannot hide the steps'.
"""

import os
import subprocess
import sys

_PROBE = """
import sys
sys.path.insert(0, {here!r})
import train_steps
lib = __import__({lib!r})
step = train_steps.WORKLOADS[{workload!r}](lib)

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = status("VmRSS:")
for _ in range(5):
    step()
print(status("VmHWM:") - base)
"""

WORKLOADS = ("GPT 2x128, 16x64 step", "ResNet block 32x3x32x32 step",
             "LSTM LM 2x256, 35x20 step")


def _peak_growth_mib(lib, workload):
    code = _PROBE.format(here=os.path.dirname(os.path.abspath(__file__)), lib=lib,
                         workload=workload)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.split()[-1]) / 1024        # /proc reports KiB


def rows(ember, torch):
    """[(label, ember MiB, torch MiB or None)] of each workload's step memory."""
    return [(workload, _peak_growth_mib("ember", workload),
             _peak_growth_mib("torch", workload) if torch is not None else None)
            for workload in WORKLOADS]
