"""The evidence a run leaves: the result document, its files on disk, the answer journal."""
