"""The main window's fixed parts: the header (model button, toggles), the ask panel (situation, options,
Decide/Cancel) and the status bar's labels. Plain widgets: the window connects and fills them."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QStatusBar,
    QVBoxLayout,
    QWidget,
)

from .elided import ElidedLabel
from .options_editor import OptionsEditor


def caption(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("SectionTitle")
    return label


class Header(QWidget):
    """Logo, the model button, and the Overlay and Settings toggles."""

    def __init__(self, overlay_on: bool, settings_on: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Header")
        self.setFixedHeight(56)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(18, 8, 14, 8)
        layout.setSpacing(8)
        logo = QLabel("D")
        logo.setObjectName("Logo")
        logo.setAlignment(Qt.AlignmentFlag.AlignCenter)
        logo.setFixedSize(28, 28)
        word = QLabel("Decider")
        word.setObjectName("Wordmark")
        layout.addWidget(logo)
        layout.addSpacing(2)
        layout.addWidget(word)
        layout.addStretch(1)
        self.model_button = QPushButton("Choose a model…")
        self.model_button.setObjectName("ModelButton")
        self.model_button.setMinimumWidth(340)
        self.model_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.model_button.setToolTip("Choose or change the model (a Qwen3.5 OpenVINO export folder)")
        layout.addWidget(self.model_button)
        layout.addStretch(1)
        self.watch_button = QPushButton("Watch")
        self.watch_button.setObjectName("Toggle")
        self.watch_button.setCheckable(True)
        self.watch_button.setToolTip("Watch mode: grab the screen (or the picked region) again and again and decide "
                                     "when the picture changes (Ctrl+Shift+W)")
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("Toggle")
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Pause Decider: watch mode grabs nothing until you resume")
        layout.addWidget(self.watch_button)
        layout.addWidget(self.pause_button)
        self.overlay_button = QPushButton("Overlay")
        self.overlay_button.setObjectName("Toggle")
        self.overlay_button.setCheckable(True)
        self.overlay_button.setChecked(overlay_on)
        self.overlay_button.setToolTip("Show the companion overlay (always on top, beside a game)")
        self.settings_button = QPushButton("Settings")
        self.settings_button.setObjectName("Toggle")
        self.settings_button.setCheckable(True)
        self.settings_button.setChecked(settings_on)
        layout.addWidget(self.overlay_button)
        layout.addWidget(self.settings_button)


class AskPanel(QWidget):
    """The situation, the options, the Think/Debias toggles and Decide / Cancel."""

    def __init__(self, think: bool, permute: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Panel")
        layout = QVBoxLayout(self)
        self.column = layout  # the window inserts the picture slot into it
        layout.setContentsMargins(16, 16, 12, 14)
        layout.setSpacing(8)
        layout.addWidget(caption("SITUATION"))
        self.question = QPlainTextEdit()
        self.question.setPlaceholderText("Describe the situation and ask the question…")
        self.question.setTabChangesFocus(True)
        self.question.setMinimumHeight(90)
        layout.addWidget(self.question, 1)
        layout.addSpacing(6)
        self.options = OptionsEditor()
        options_head = QHBoxLayout()
        options_head.addWidget(caption("OPTIONS"))
        options_head.addStretch(1)
        options_head.addWidget(self.options.count_label)  # "3 options · 2 to 10": beside the caption it fits
        layout.addLayout(options_head)
        layout.addWidget(self.options)
        layout.addSpacing(4)

        toggles = QHBoxLayout()
        self.think_box = QCheckBox("Think first")
        self.think_box.setToolTip("the model reasons before it answers (slower); see the settings for its budget")
        self.think_box.setChecked(think)
        self.permute_box = QCheckBox("Debias order")
        self.permute_box.setToolTip("ask once per cyclic order of the options and average the bars")
        self.permute_box.setChecked(permute)
        toggles.addWidget(self.think_box)
        toggles.addWidget(self.permute_box)
        toggles.addStretch(1)
        layout.addLayout(toggles)

        buttons = QHBoxLayout()
        self.decide_button = QPushButton("Decide")
        self.decide_button.setObjectName("Primary")
        self.decide_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.decide_button.setToolTip("Decide (Ctrl+Enter)")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("Danger")
        self.cancel_button.setToolTip("Stop the running decision (Esc)")
        self.cancel_button.hide()
        buttons.addWidget(self.decide_button, 1)
        buttons.addWidget(self.cancel_button, 1)
        layout.addLayout(buttons)
        self.shortcut_hint = QLabel("Ctrl+Enter to decide")
        self.shortcut_hint.setObjectName("RangeHint")
        self.shortcut_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.shortcut_hint.setWordWrap(True)
        layout.addWidget(self.shortcut_hint)

    def show_running(self, running: bool, ready: bool) -> None:
        """Decide while idle (enabled when a model is ready), Cancel while a decision runs."""
        self.decide_button.setVisible(not running)
        self.cancel_button.setVisible(running)
        if not running:
            self.cancel_button.setEnabled(True)
            self.cancel_button.setText("Cancel")
        self.decide_button.setEnabled(ready)
        self.decide_button.setToolTip("Decide (Ctrl+Enter)" if ready else "Load a model first")

    def show_cancelling(self) -> None:
        self.cancel_button.setEnabled(False)
        self.cancel_button.setText("Cancelling…")


class StatusLabels:
    """The status bar: a message on the left (elided with "…", the full text in its tooltip: QStatusBar's own
    message is cut mid-word) and the permanent labels: busy, model, device, engine, latency, tokens, hotkey."""

    def __init__(self, bar: QStatusBar) -> None:
        bar.setSizeGripEnabled(False)
        self.message = ElidedLabel()
        self.message.setObjectName("StatusMessage")
        self.message.setContentsMargins(6, 0, 6, 0)
        bar.addWidget(self.message, 1)
        self._message_timer = QTimer(bar, singleShot=True)
        self._message_timer.timeout.connect(lambda: self.message.setText(""))
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setTextVisible(False)
        self.busy.setFixedWidth(90)
        self.busy.hide()
        self.model = QLabel("no model")
        self.device = QLabel("")
        self.engine = QLabel("")
        self.latency = QLabel("")
        self.tokens = QLabel("")
        self.hotkey = QLabel("")
        bar.addPermanentWidget(self.busy)
        for label in (self.model, self.device, self.engine, self.latency, self.tokens, self.hotkey):
            bar.addPermanentWidget(label)
        self.bar = bar
        self._fit_timer = QTimer(bar, singleShot=True, interval=0)  # owned by the bar: it goes with the window
        self._fit_timer.timeout.connect(self.fit)
        self.folded: list[QLabel] = []  # labels left out for want of room (their text is in the model's tooltip)
        bar.installEventFilter(_Refit(self, bar))

    def fit(self) -> None:
        """Leave out labels, least needed first, until the rest fit whole beside a readable message; their text
        goes into the model label's tooltip (a narrow window then shows no cut label)."""
        labels = [self.model, self.device, self.engine, self.latency, self.tokens, self.hotkey]
        layout = self.bar.layout()
        spacing = 2 * (layout.spacing() if layout is not None else 0) + 4  # between labels, and their padding
        room = self.bar.width() - MESSAGE_ROOM - (self.busy.width() + spacing if self.busy.isVisible() else 0)
        shown = [label for label in labels if label.text()]
        for label in fold_order(self):
            if sum(label.sizeHint().width() + spacing for label in shown) <= room:
                break
            if label in shown:
                shown.remove(label)
        self.folded = [label for label in labels if label.text() and label not in shown]
        for label in labels:
            label.setVisible(label in shown)
        self.model.setToolTip("\n".join(label.text() for label in self.folded))

    def schedule_fit(self) -> None:
        self._fit_timer.start()

    def show_message(self, text: str, timeout_ms: int = 0) -> None:
        """Show text until the next message (or for timeout_ms)."""
        self._message_timer.stop()
        self.message.setText(text)
        if timeout_ms > 0:
            self._message_timer.start(timeout_ms)

    def current_message(self) -> str:
        return self.message.text()


MESSAGE_ROOM = 160  # the status message keeps at least this much (it elides into it)


def fold_order(labels: StatusLabels) -> tuple[QLabel, ...]:
    """Which status labels a narrow window leaves out first: the hotkey (also in the settings and under Decide),
    the engine's arithmetic, the token counts, the device; the model and the latency stay."""
    return (labels.hotkey, labels.engine, labels.tokens, labels.device)


class _Refit(QObject):
    """Re-fits the status labels when the bar is resized or a label's text (size) changes."""

    def __init__(self, labels: StatusLabels, parent: QObject) -> None:
        super().__init__(parent)
        self.labels = labels

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() in (QEvent.Type.Resize, QEvent.Type.LayoutRequest):
            self.labels.schedule_fit()
        return False


def connection_message(report) -> tuple[str, bool]:
    """(status text, ok?) for a remote connection test's report (models served, logprobs returned?)."""
    models = list(report.models)
    names = ", ".join(models[:6]) + (f" and {len(models) - 6} more" if len(models) > 6 else "")
    served = f"serves {len(models)} model{'s' if len(models) != 1 else ''}: {names}" if models else "serves no model"
    if report.logprobs:
        return f"✓ Connected: {served} · returns logprobs (top-20 alternatives)", True
    return f"Connected, but the server does not return logprobs: decisions will fail. It {served}.", False
