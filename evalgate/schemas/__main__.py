"""Write the schemas generated from evidence/model.py: python -m evalgate.schemas."""

from evalgate.schemas import main

main()
