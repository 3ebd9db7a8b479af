"""Write the schemas generated from their types beside them: python -m evalgate.schemas."""

from evalgate.schemas import HERE
from evalgate.schemas.generated import TYPES, generate

for name in TYPES:
    (HERE / f"{name}.schema.json").write_text(generate(name), encoding="utf-8")
