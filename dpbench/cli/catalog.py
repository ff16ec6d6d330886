"""`dpbench list`: the components dpbench knows, with their papers and declared parameters."""

from __future__ import annotations

import click

from dpbench.spec.catalog import KINDS as CATALOG_KINDS


@click.command(name="list")
@click.argument("what", required=False, type=click.Choice(CATALOG_KINDS))
@click.option("--plugin", "plugins_", multiple=True, metavar="REF",
              help="load a plugin first (path/to/file.py:object or package.module:object) so it is listed too; "
                   "repeatable")
@click.option("--markdown", is_flag=True, help="Markdown (docs/reference/components.md is this output)")
def list_(what, plugins_, markdown) -> None:
    """List the components dpbench knows, with their papers and declared parameters.

    Algorithms, data sets, models, canary recipes (audits) and figure kinds, each with every
    parameter's type, default, range and meaning. Components of installed packages (entry points)
    are named but not loaded until a spec or a command names them; --plugin loads a plugin file.
    """
    from dpbench.run import plugins
    from dpbench.spec import catalog

    for reference in plugins_:
        plugins.load(reference)
    click.echo("\n".join(catalog.lines(what, markdown=markdown)))
