"""Where the bundled demo model and task are: the repository's top-level `assets/`, which the package
installs as `reachtui.bundled` (pyproject's package-dir), so a wheel carries them and `demo` works from
any directory."""

from importlib.resources import files
from pathlib import Path

BUNDLED = Path(str(files("reachtui.bundled")))
DEMO_MODEL_DIR = BUNDLED / "models" / "demo"
DEMO_TASK_PATH = BUNDLED / "tasks" / "demo.jsonl"
