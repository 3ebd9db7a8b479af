"""Walking a sweep's tree: the files verify reads under a folder, each folder searched once.

Links to folders are followed: a sweep may be assembled from run folders kept elsewhere. A
folder is known by its device and inode, so a folder met a second time (a link back up the
tree, or two ways to one folder) is searched once, and the other way is listed as ignored, as
is a link to nothing.
"""

from __future__ import annotations

import os

import msgspec

from evalgate.errors import UsageError
from evalgate.evidence.artifacts import HOOK_NAME, META_NAME, RESULT_NAME
from evalgate.evidence.harness_layout import is_results_file
from evalgate.verify.records import Collection, Note


class Tree(msgspec.Struct):
    """The files under one root that verify reads, in the order walked."""

    results: list[str] = msgspec.field(default_factory=list)
    metas: dict[str, str] = msgspec.field(default_factory=dict)
    """meta_env.json path by folder."""
    candidates: list[str] = msgspec.field(default_factory=list)
    hooks: list[str] = msgspec.field(default_factory=list)


def _folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # through a symbolic link too
    except OSError:  # a link into a folder that cannot be read: named below as unreachable
        return False


def _list(
    folder: str, tree: Tree, seen: dict[tuple[int, int], str], notes: Collection
) -> list[str]:
    """The folders inside `folder` not met before; the files there that verify reads go to
    `tree`. Folders are known by device and inode, so a link back up ends the descent."""
    inside = []
    with os.scandir(folder) as listing:
        for entry in listing:
            name, path = entry.name, entry.path
            if _folder(entry):
                info = entry.stat()
                first = seen.setdefault((info.st_dev, info.st_ino), path)
                if first == path:
                    inside.append(path)
                else:
                    again = f"{path} is the folder {first} again (a symbolic link): searched once"
                    notes.ignored.append(Note(path, again))
            elif name == RESULT_NAME:
                tree.results.append(path)
            elif name == META_NAME:
                tree.metas[folder] = path
            elif name == HOOK_NAME:
                tree.hooks.append(path)
            elif is_results_file(name):
                tree.candidates.append(path)
            elif entry.is_symlink() and not os.path.exists(path):
                nowhere = (
                    f"{path} is a symbolic link to {os.readlink(path)}, which cannot be reached"
                )
                notes.ignored.append(Note(path, nowhere + ": not searched"))
    return inside


def walk(root: str, notes: Collection) -> Tree:
    """The files verify reads under the folder root, level by level; a folder that cannot be
    listed is malformed (the root itself: a UsageError), a folder met again or a link to
    nothing is ignored, each with its reason in `notes`."""
    tree = Tree()
    info = os.stat(root)
    seen = {(info.st_dev, info.st_ino): root}
    level = [root]
    while level:
        inside: list[str] = []
        for folder in level:
            try:
                inside += _list(folder, tree, seen, notes)
            except OSError as exc:
                if folder == root:
                    raise UsageError(f"Cannot list {folder}: {exc.strerror}.") from exc
                lost = f"Cannot list {folder}: {exc.strerror}; the results in it go unchecked"
                notes.malformed.append(Note(folder, lost))
        level = inside
    return tree
