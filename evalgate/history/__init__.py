"""The history (docs/history.md): every run `evalgate verify --record` gated, kept in an SQLite
file or on a PostgreSQL server (store.py), written one verify call at a time (record.py), read
back as trends, a page, a baseline and a fit's runs (look.py), floors fitted from them (fit.py).
"""
