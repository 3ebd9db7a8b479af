"""The history: every run `evalgate verify --record` gated, kept in an SQLite file or on a
PostgreSQL server (store.py), written one verify call at a time (record.py), read back as trends,
a baseline and the runs a fit takes (look.py), and drawn as a page (page.py). docs/history.md.
"""
