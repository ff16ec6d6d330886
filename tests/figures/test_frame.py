"""dpbench.figures.frame: saving PNG and PDF (same figure, same bytes) and the notes in a panel's
emptiest corner."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpbench.figures.frame import corner_note, finish, place_corner_notes, save, seeds_note


def _figure():
    fig, axes = plt.subplots(1, 1, squeeze=False)
    axes[0][0].plot([1, 2, 3], [1, 4, 9], label="curve")
    return fig, axes


def test_save_writes_png_and_pdf_with_the_same_bytes_each_time(tmp_path):
    fig, _ = _figure()
    paths = save(fig, tmp_path / "a")
    assert paths == [tmp_path / "a.png", tmp_path / "a.pdf"]
    assert not plt.fignum_exists(fig.number)  # closed once written
    first = [p.read_bytes() for p in paths]
    fig, _ = _figure()
    save(fig, tmp_path / "a")
    assert [p.read_bytes() for p in paths] == first  # the PDF carries no creation date
    assert first[0][:4] == b"\x89PNG" and first[1][:5] == b"%PDF-"
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_finish_adds_legend_footer_and_title_below_and_above_the_panels(tmp_path):
    fig, axes = _figure()
    height = fig.get_figheight()
    finish(fig, axes, fig.get_figwidth(), "a title", tmp_path / "b", note="a footer")
    assert fig.get_figheight() > height  # the panels keep their height
    assert [t.get_text() for t in fig.texts] == ["a footer", "a title"]  # the footer, the suptitle
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["curve"]


def test_corner_notes_go_to_the_emptiest_corner_first_ones_on_top():
    fig, axes = plt.subplots(1, 1, squeeze=False)
    ax = axes[0][0]
    ax.plot(np.linspace(0, 1, 50), np.linspace(0, 1, 50))  # the diagonal crowds two corners
    ax.plot([0.95, 1.0], [0.0, 0.05], linestyle="none", marker="o")  # and these the bottom right
    corner_note(ax, "second")
    corner_note(ax, "first", first=True)
    place_corner_notes(fig, axes)
    (text,) = ax.texts
    plt.close(fig)
    assert text.get_text() == "first\nsecond"
    assert (text.get_horizontalalignment(), text.get_verticalalignment()) == ("left", "top")
    assert text.get_position() == (0.02, 0.97)


def test_corner_notes_go_above_the_panel_when_every_corner_has_a_line():
    fig, axes = plt.subplots(1, 1, squeeze=False)
    ax = axes[0][0]
    ax.set_title("panel")
    x = np.linspace(0, 1, 50)
    ax.plot(x, np.full(50, 0.03))  # a line along the bottom and one along the top: no free corner
    ax.plot(x, np.full(50, 0.97))
    ax.set_ylim(0, 1)
    corner_note(ax, "rate fit: c = 3")
    place_corner_notes(fig, axes)
    (text,) = ax.texts
    fig.canvas.draw()
    box = text.get_window_extent().transformed(ax.transAxes.inverted())
    title = ax.title.get_window_extent().transformed(ax.transAxes.inverted())
    plt.close(fig)
    assert text.get_text() == "rate fit: c = 3" and text.get_horizontalalignment() == "right"
    assert box.y0 >= 1.0 and box.y1 <= title.y0 + 1e-6  # between the panel's top edge and its title


def test_seeds_note_names_only_the_curves_that_differ():
    """The footer names the curves whose points have another seed count than most."""
    same = pd.DataFrame({"label": ["A", "A", "B"], "count": [20, 20, 20]})
    assert seeds_note(same) == ""
    mixed = pd.DataFrame({"label": ["A", "A", "B", "B", "C"], "count": [20, 40, 20, 20, 30]})
    assert seeds_note(mixed) == "seeds per point: 20; A 20-40, C 30"
    assert seeds_note(pd.DataFrame({"label": ["A"]})) == ""
