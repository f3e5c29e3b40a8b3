"""Where the bundled demo model and task live (the repository's top-level `assets/`)."""

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
DEMO_MODEL_DIR = ASSETS_DIR / "models" / "demo"
DEMO_TASK_PATH = ASSETS_DIR / "tasks" / "demo.jsonl"
