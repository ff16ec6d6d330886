"""MkDocs hook: publish the committed results next to the pages.

The per-paper pages show the figures that `make figures` commits under `results/<experiment>/`,
which lie outside `docs_dir`. `on_files` adds every `results/*/*.png` (and the claims tables and
curves they come from) of the repository root to the build, under the same relative path, so a
page `docs/papers/pidp.md` links `../results/pidp/fig1-accuracy.png` and `mkdocs build --strict`
checks that the file exists.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

PATTERNS = ("results/*/*.png",)


def on_files(files, config):
    root = Path(config["config_file_path"]).resolve().parent
    for pattern in PATTERNS:
        for path in sorted(root.glob(pattern)):
            rel = path.relative_to(root).as_posix()
            if files.get_file_from_path(rel) is None:
                files.append(File(rel, src_dir=str(root), dest_dir=config["site_dir"],
                                  use_directory_urls=config["use_directory_urls"]))
    return files
