"""The rules gate, verify and compare share: the gate rule, its intervals, the sequential test."""
