"""Make the shared helpers of this folder importable from its test modules."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
