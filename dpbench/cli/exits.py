"""The exit codes of `dpbench` and the command group that maps errors to them.

Exit codes:
  0  done;
  1  cells failed (`run` lists them; the others are stored), or `check` found moved curves, or
     `data verify` / `data fetch` found a file missing or corrupt (fetch: also a network failure),
     or `bench --against opacus` found torch or opacus not installed (one line: how to install);
  2  a usage error: bad YAML, option or argument, missing data, a results folder that cannot be
     one (one line `error: ...`);
  4  `verify` found a run suspect (an audit estimate above the claim: a warning, not a proof);
     a mismatch it found exits 1;
  3  the file system refused a write or read of results: read-only, full (ENOSPC), no
     permission (one line `error: ...` naming the file; what was stored before stays stored);
  130 interrupted (Ctrl-C): one line; finished results stay stored and a rerun resumes.
Anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import errno
import sys

import click

from dpbench.core.errors import DpbenchError

EXIT_USAGE = 2
EXIT_FILESYSTEM = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
#: what the file system says when it cannot hold results: these end in one line, not a traceback
FILESYSTEM_ERRORS = {
    errno.ENOSPC: "the disk is full; free space and rerun: every cell stored before is reused",
    errno.EDQUOT: "the disk quota is exhausted; free space and rerun: every cell stored before is reused",
    errno.EROFS: "read-only file system; point --results at a writable folder",
    errno.EACCES: "permission denied; point --results at a folder you may write",
    errno.EPERM: "operation not permitted; point --results at a folder you may write",
    errno.ENOTDIR: "a part of this path is a file, not a folder",
    errno.EEXIST: "a file is in the way of a folder",
    errno.EISDIR: "a folder is in the way of a file",
}


def filesystem_error_line(exc: OSError) -> str:
    """One line for an OSError of FILESYSTEM_ERRORS: what failed, where, and what to do."""
    where = exc.filename if exc.filename is not None else "(unknown file)"
    return f"cannot write or read {where}: {exc.strerror or exc} -- {FILESYSTEM_ERRORS[exc.errno]}"


class ErrorExitGroup(click.Group):
    """A click group that turns DpbenchError into one line on stderr and exit code 2, and a file
    system refusal (read-only, full, not a folder, permission) into one line and exit code 3."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DpbenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except OSError as exc:
            if exc.errno not in FILESYSTEM_ERRORS:
                raise
            click.echo(f"error: {filesystem_error_line(exc)}", err=True)
            sys.exit(EXIT_FILESYSTEM)
        except KeyboardInterrupt:
            click.echo("interrupted: every result finished before is stored (cells, L* solutions, audit "
                       "chunks); rerun the same command to resume", err=True)
            sys.exit(EXIT_INTERRUPTED)
