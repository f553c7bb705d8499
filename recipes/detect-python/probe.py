"""Printed by the interpreter under inspection: one JSON line about itself."""

import json
import platform
import sys

try:
    import pip

    pip_version = pip.__version__
except Exception:  # noqa: BLE001 - a pip broken in any way in the inspected interpreter counts as absent
    pip_version = "absent"

print(json.dumps({"executable": sys.executable, "version": platform.python_version(),
                  "implementation": platform.python_implementation(), "pip": pip_version}))
