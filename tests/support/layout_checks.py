"""What "the window works at this size" means, checked on the live widget tree (issue 39 item 1):

- no shown widget is smaller than its minimum (its minimum size, else its minimumSizeHint), where its size
  policy does not say it may be squeezed (Ignored);
- no shown widget sticks out of its parent (a scroll area's content may, where that area scrolls);
- no shown label shows less than its text without the whole text in its tooltip;
- no two shown siblings in the same layout overlap.

Each check returns a list of readable problems (empty: fine) so a failing test says what broke where.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QLabel,
    QScrollArea,
    QScrollBar,
    QSizePolicy,
    QSplitterHandle,
    QStackedWidget,
    QWidget,
)

IGNORED = QSizePolicy.Policy.Ignored


def name_of(widget: QWidget) -> str:
    """Class, object name and a piece of its text: enough to find it in the code."""
    text = ""
    for getter in ("text", "title", "placeholderText"):
        value = getattr(widget, getter, None)
        if callable(value):
            try:
                text = str(value())[:40]
            except TypeError:
                continue
            if text:
                break
    parent = widget.parentWidget()
    where = type(parent).__name__ if parent is not None else "-"
    return f"{type(widget).__name__}#{widget.objectName()}[{text!r}] in {where}"


def shown_widgets(root: QWidget) -> list[QWidget]:
    """Every descendant that is shown (itself and all its ancestors up to root) and not a separate window."""
    return [w for w in root.findChildren(QWidget) if not w.isWindow() and w.isVisibleTo(root) and root.isVisible()]


def _in_scrolled_content(widget: QWidget) -> bool:
    """The widget of a scroll area (or inside one) may be larger than what shows: it scrolls."""
    parent = widget.parentWidget()
    grand = parent.parentWidget() if parent is not None else None
    return isinstance(grand, QAbstractScrollArea) and parent is grand.viewport()


def _minimum(widget: QWidget) -> tuple[int, int]:
    """The size a layout promises the widget: an explicit minimum, else the hint (unless the policy ignores it)."""
    hint = widget.minimumSizeHint()
    policy = widget.sizePolicy()
    width = widget.minimumWidth() or (hint.width() if policy.horizontalPolicy() != IGNORED else 0)
    height = widget.minimumHeight() or (hint.height() if policy.verticalPolicy() != IGNORED else 0)
    return max(width, 0), max(height, 0)


def too_small(root: QWidget) -> list[str]:
    problems = []
    for widget in shown_widgets(root):
        if isinstance(widget, (QScrollBar, QSplitterHandle)):
            continue
        width, height = _minimum(widget)
        if widget.width() < width or widget.height() < height:
            problems.append(f"{name_of(widget)}: {widget.width()}×{widget.height()} < minimum {width}×{height}")
    return problems


def sticking_out(root: QWidget) -> list[str]:
    problems = []
    for widget in shown_widgets(root):
        parent = widget.parentWidget()
        if parent is None or _in_scrolled_content(widget):
            continue
        if not parent.rect().contains(widget.geometry()):
            g = widget.geometry()
            problems.append(f"{name_of(widget)}: {g.x()},{g.y()} {g.width()}×{g.height()} outside its parent "
                            f"{parent.width()}×{parent.height()}")
    return problems


def cut_scroll_content(root: QWidget) -> list[str]:
    """A scroll area that cannot scroll sideways (its bar is off) and holds content wider than it shows: the
    right side is cut off with nothing to reach it. Downwards likewise."""
    problems = []
    for area in shown_widgets(root):
        if not isinstance(area, QScrollArea) or area.widget() is None or not area.widget().isVisibleTo(root):
            continue
        content, viewport = area.widget(), area.viewport()
        off = Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        if area.horizontalScrollBarPolicy() == off and content.width() > viewport.width() + 1:
            problems.append(f"{name_of(content)}: {content.width()} wide in a {viewport.width()}-wide view that does not "
                            "scroll sideways")
        if area.verticalScrollBarPolicy() == off and content.height() > viewport.height() + 1:
            problems.append(f"{name_of(content)}: {content.height()} tall in a {viewport.height()}-tall view that does "
                            "not scroll")
    return problems


def label_clipped(label: QLabel) -> bool:
    """The label shows less than its text: the text is wider or taller than the label (wrapped: at its width)."""
    if label.pixmap() is not None and not label.pixmap().isNull():
        return False
    shown = getattr(label, "shown_text", None)
    if callable(shown):  # an eliding label: clipped when it elides
        return shown() != label.text()
    if not label.text():
        return False
    rect = label.contentsRect()
    if label.wordWrap():
        return label.heightForWidth(label.width()) > label.height()
    hint = label.sizeHint()
    return hint.width() > label.width() or hint.height() > label.height() or rect.width() <= 0


def clipped_labels(root: QWidget) -> list[str]:
    problems = []
    for label in shown_widgets(root):
        if isinstance(label, QLabel) and label_clipped(label):
            full = label.text()
            if label.toolTip().replace("\n", " ").strip() != full.replace("\n", " ").strip():
                problems.append(f"{name_of(label)}: text clipped at {label.width()}×{label.height()} "
                                f"(needs {label.sizeHint().width()}×{label.sizeHint().height()}), no tooltip with it")
    return problems


def overlapping(root: QWidget) -> list[str]:
    """Shown siblings that share pixels (a 1-pixel shared edge is allowed: borders meet). A splitter's handle is
    left out: Qt widens a thin handle's grab area over its neighbours on purpose, and it paints only its line."""
    problems = []
    parents = {id(w.parentWidget()): w.parentWidget() for w in shown_widgets(root) if w.parentWidget() is not None}
    parents[id(root)] = root
    for parent in parents.values():
        if isinstance(parent, QStackedWidget):
            continue
        children = [c for c in parent.children() if isinstance(c, QWidget) and not c.isWindow() and c.isVisibleTo(root)
                    and not isinstance(c, (QScrollBar, QSplitterHandle))]
        for index, first in enumerate(children):
            for second in children[index + 1:]:
                common: QRect = first.geometry().intersected(second.geometry())
                if common.width() > 1 and common.height() > 1:
                    problems.append(f"{name_of(first)} and {name_of(second)} overlap by {common.width()}×{common.height()}")
    return problems


def layout_problems(root: QWidget) -> list[str]:
    return too_small(root) + sticking_out(root) + cut_scroll_content(root) + clipped_labels(root) + overlapping(root)
