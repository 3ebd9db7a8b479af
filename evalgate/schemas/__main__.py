"""Write the schemas generated from evidence/model.py beside it: python -m evalgate.schemas."""

from evalgate.schemas import HERE, TITLES, generate

for name in TITLES:
    (HERE / f"{name}.schema.json").write_text(generate(name), encoding="utf-8")
