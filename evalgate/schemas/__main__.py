"""Write the schemas generated from their types: python -m evalgate.schemas [FOLDER] (by default
beside this file, where they are shipped)."""

import sys
from pathlib import Path

from evalgate.schemas import HERE, TYPES, generate

folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
for name in TYPES:
    (folder / f"{name}.schema.json").write_text(generate(name), encoding="utf-8")
