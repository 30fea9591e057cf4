"""The main window's three columns (the form, the decision tabs, the settings) and how they give way when the
window is small, instead of squeezing widgets below their minimum:

- the form scrolls vertically (a short window keeps every button its height);
- when the three columns do not fit side by side, the settings become a drawer: opened, they take the decision
  column's place (the form stays); closed, the decision comes back. A decision started from the window closes
  the drawer, so its bars are seen.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QScrollArea, QSplitter, QWidget

SETTINGS_MAX_WIDTH = 420
HANDLE_WIDTH = 1
QWIDGETSIZE_MAX = (1 << 24) - 1


class FormScroll(QScrollArea):
    """The form column: scrolls vertically, never sideways, and is as wide as its content's minimum needs.

    The content is as tall as the column, or its minimum height when the column is shorter (then it scrolls):
    a resizable scroll area would give it its preferred height, and the situation box's preference would push
    the options and Decide out of a short window."""

    def __init__(self, content: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setWidget(content)
        scrollbar = self.verticalScrollBar().sizeHint().width()
        self.setMinimumWidth(content.minimumSizeHint().width() + scrollbar)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.fit_content()

    def fit_content(self) -> None:
        content = self.widget()
        if content is None:
            return
        viewport = self.viewport()
        layout = content.layout()
        # at this width (wrapped labels take more lines when narrow)
        needed = layout.totalMinimumHeightForWidth(viewport.width()) if layout is not None else content.minimumSizeHint().height()
        content.resize(viewport.width(), max(viewport.height(), needed))


class WindowColumns(QObject):
    """Places the columns in the splitter and switches the settings between a column and a drawer."""

    drawer_changed = Signal(bool)  # True: the settings are a drawer now (the window is too narrow for three)

    def __init__(self, splitter: QSplitter, form: FormScroll, center: QWidget, settings: QWidget) -> None:
        super().__init__(splitter)
        self.splitter, self.form, self.center, self.settings = splitter, form, center, settings
        splitter.setChildrenCollapsible(False)
        splitter.setHandleWidth(HANDLE_WIDTH)
        for column in (form, center, settings):
            splitter.addWidget(column)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setStretchFactor(2, 0)
        settings.setMinimumWidth(self._settings_minimum())
        settings.setMaximumWidth(SETTINGS_MAX_WIDTH)
        self.drawer = False
        self.settings_open = False
        splitter.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.splitter and event.type() == QEvent.Type.Resize:
            self.fit()
        return False

    def _settings_minimum(self) -> int:
        body = self.settings.widget() if isinstance(self.settings, QScrollArea) else None  # the settings panel scrolls its form
        content = body.minimumSizeHint().width() if body is not None else self.settings.minimumSizeHint().width()
        return content + 12  # its vertical scroll bar

    def three_columns_width(self) -> int:
        """The narrowest splitter that shows form, decision and settings side by side at their minimums."""
        center = max(self.center.minimumSizeHint().width(), self.center.minimumWidth())
        return self.form.minimumWidth() + center + self.settings.minimumWidth() + 2 * HANDLE_WIDTH

    def set_settings_open(self, open_: bool) -> None:
        self.settings_open = open_
        self.fit()

    def fit(self) -> None:
        """Columns or drawer for the splitter's current width; the settings shown when open."""
        # before the window is first shown the splitter has no real width yet: three columns until it has
        drawer = self.splitter.isVisible() and self.splitter.width() < self.three_columns_width()
        changed = drawer != self.drawer
        self.drawer = drawer
        covered = drawer and self.settings_open
        self.settings.setMaximumWidth(QWIDGETSIZE_MAX if covered else SETTINGS_MAX_WIDTH)
        self.center.setVisible(not covered)
        self.settings.setVisible(self.settings_open)
        form = max(self.form.width(), self.form.minimumWidth())
        if covered:
            rest = max(self.splitter.width() - form - HANDLE_WIDTH, self.settings.minimumWidth())
            self.splitter.setSizes([form, 0, rest])
        elif changed or self.settings.width() > SETTINGS_MAX_WIDTH:
            # back to three columns: the settings at their narrowest, the decision takes the rest
            settings = self.settings.minimumWidth() if self.settings_open else 0
            self.splitter.setSizes([form, self.splitter.width() - form - settings - 2 * HANDLE_WIDTH, settings])
        if changed:
            self.drawer_changed.emit(drawer)

    def covers_decision(self) -> bool:
        """The settings drawer is open over the decision column."""
        return self.drawer and self.settings_open
