"""Where the bundled demo models, task and import examples are: the repository's top-level `assets/`, which
the package installs as `reachtui.bundled` (pyproject's package-dir), so a wheel carries them and `demo`
works from any directory."""

from importlib.resources import files
from pathlib import Path

BUNDLED = Path(str(files("reachtui.bundled")))
DEMO_MODEL_DIR = BUNDLED / "models" / "demo"
# The models a bare name finds: `demo`, and `demo-tuned` (the demo model after GRPO; its README says how).
BUNDLED_MODELS = {"demo": DEMO_MODEL_DIR, "demo-tuned": BUNDLED / "models" / "demo-tuned"}
DEMO_TASK_PATH = BUNDLED / "tasks" / "demo.jsonl"
# Generations of the demo task in every format `reachtui import` reads (`reachtui examples` copies them out).
EXAMPLES_DIR = BUNDLED / "examples"
