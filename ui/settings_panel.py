"""The settings panel: every value with its range, validated by the same rules the engine uses.

A value the rules refuse is not taken: the field turns red, the message says why, and the stored
settings keep the last valid value. Every accepted edit is announced with `settings_changed`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QKeySequenceEdit,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSlider,
    QSpinBox,
    QWidget,
)

from decider.engine.compile.devices import DEVICES
from decider.engine.core.errors import SettingsError
from decider.engine.core.settings import DECISION_SETTINGS, IMAGE_PIXELS_DEFAULT, SAMPLING_NAMES, SETTINGS

from .ports import Settings, SettingsRules
from .settings_form import LIST_SEPARATOR, SettingsForm, split_list
from .theme import set_role

CLIPBOARD_FORMAT = (
    "The hotkey decides on the clipboard's text:\n"
    "  first the situation (one or more lines),\n"
    "  then 2 to 10 options, one per line, with or without A. / A) / 1. / - markers.\n"
    "A blank line between situation and options makes the split explicit; without one,\n"
    "the trailing marked lines are the options, else every line after the first."
)

ENGINE_CHOICES = (("local", "Local folder"), ("remote", "Remote server"))


class SettingsPanel(SettingsForm):
    settings_changed = Signal(object, str)  # the new settings, the name of the field that changed
    model_defaults_requested = Signal()
    test_connection_requested = Signal()
    connect_requested = Signal()

    def __init__(self, settings: Settings, rules: SettingsRules, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.rules = rules
        self._model_defaults = None
        # the form's sections, top to bottom
        self._build_head()
        self._build_sampling()
        self._build_decision()
        self._build_engine()
        self._build_local()
        self._build_remote()
        self._build_overlay()
        self._build_api()
        self._layout.addStretch(1)
        self.set_settings(settings)

    def _build_head(self) -> None:
        """The title and the model-defaults button."""
        head = QHBoxLayout()
        title = QLabel("Settings")
        title.setStyleSheet("font-size: 12pt; font-weight: 700;")
        self.defaults_button = QPushButton("Model defaults")
        self.defaults_button.setToolTip("Restore the sampling values from the model's generation_config (Qwen3.5's defaults where it names none)")
        self.defaults_button.setEnabled(False)
        self.defaults_button.clicked.connect(self.model_defaults_requested.emit)
        head.addWidget(title)
        head.addStretch(1)
        head.addWidget(self.defaults_button)
        self._layout.addLayout(head)

    def _build_sampling(self) -> None:
        """One row per sampling setting, in the declared order."""
        grid = self._section("SAMPLING")
        for name in SAMPLING_NAMES:  # every sampling setting users set, in the declared order
            if SETTINGS[name].optional:
                self._seed(grid)  # a text field: empty is a value
            elif SETTINGS[name].choices:
                self._choice(grid, name)
            else:
                self._number(grid, name)

    def _build_decision(self) -> None:
        """One row per decision setting, in the declared order (engine.settings' DecisionSettings); max tokens;
        the system prompt."""
        grid = self._section("DECISION")
        for setting in DECISION_SETTINGS:
            if setting.kind is bool:
                self._check(grid, setting.name, setting.label, setting.form_help or setting.help)
            else:
                self._number(grid, setting.name)
        self._number(grid, "max_tokens")
        label = QLabel("System prompt")
        label.setObjectName("Caption")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setPlaceholderText("optional: who the model is, what it should weigh")
        self.system_prompt.setFixedHeight(64)
        self.system_prompt.setTabChangesFocus(True)
        self._system_timer = QTimer(self, singleShot=True, interval=400)
        self._system_timer.timeout.connect(lambda: self._edit("system_prompt", self.system_prompt.toPlainText()))
        self.system_prompt.textChanged.connect(self._system_timer.start)
        row = grid.rowCount()
        grid.addWidget(label, row, 0, 1, 2)
        grid.addWidget(self.system_prompt, row + 1, 0, 1, 2)
        self.fields["system_prompt"] = self.system_prompt

    def _build_engine(self) -> None:
        """Local folder or remote server."""
        grid = self._section("ENGINE")
        self.engine = QComboBox()
        for value, text in ENGINE_CHOICES:
            self.engine.addItem(text, value)
        self.engine.setProperty("byData", True)
        self.engine.setToolTip(
            "Local folder: an OpenVINO model folder run on this computer (exact full-vocabulary logprobs).\n"
            "Remote server: an OpenAI-compatible server with logprobs (vLLM, OpenVINO Model Server, llama.cpp, "
            "another Decider); bars come from its top-20 alternatives."
        )
        self.engine.currentIndexChanged.connect(lambda _i: self._edit("engine", self.engine.currentData()))
        self._row(grid, "engine", "Engine", self.engine, "where decisions run", width=150)

    def _build_local(self) -> None:
        """The local engine's rows: devices, image hashes, exactness."""
        self.local_box = QWidget()
        grid = self._box_grid(self.local_box)
        self.device = QComboBox()
        self.device.addItems(list(DEVICES))
        self.device.setToolTip("AUTO picks NPU, then GPU, then CPU. Changing it reloads the model.")
        self.device.currentTextChanged.connect(lambda text: self._edit("device", text))
        self._row(grid, "device", "Device", self.device, "changing it reloads the model")
        self.vision_device = QComboBox()
        self.vision_device.addItems(list(DEVICES))
        self.vision_device.setToolTip("Runs the vision encoder (images, screen captures). CPU keeps the bars exact; "
                                      "on the NPU images are scaled into a fixed size. Changing it reloads the model.")
        self.vision_device.currentTextChanged.connect(lambda text: self._edit("vision_device", text))
        self._row(grid, "vision_device", "Vision device", self.vision_device, "changing it reloads the model")
        self.history_image_hashes = self._check(grid, "history_image_hashes", "History keeps image hashes",
                                                "on: the history keeps each image's size and the sha256 of its pixels; "
                                                "off: the size only. Never the picture.")
        self.exact = self._check(grid, "exact", "Exact logprobs (f32)", "off compiles the reduced precision measured fastest here (bf16/f16 where the device has it, a u8 KV cache, int8 activations): faster, bars drift and are labelled reduced; exact where nothing measured faster on this CPU. Reloads the model.")

    def _build_remote(self) -> None:
        """The remote server's rows, its buttons and connection status."""
        self.remote_box = QWidget()
        grid = self._box_grid(self.remote_box)
        self.remote_url = QLineEdit()
        self.remote_url.setPlaceholderText("http://gpu-box:8000/v1")
        self.remote_url.setToolTip(
            "base URL of an OpenAI-compatible server that returns logprobs (with or without /v1):\n"
            "vLLM, OpenVINO Model Server, llama.cpp's server, or another Decider"
        )
        self.remote_url.editingFinished.connect(lambda: self._edit("remote_url", self.remote_url.text().strip()))
        self._wide_row(grid, "remote_url", "Server URL", self.remote_url, "OpenAI-compatible, with logprobs")
        self.remote_api_key = QLineEdit()
        self.remote_api_key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.remote_api_key.setPlaceholderText("none")
        self.remote_api_key.setToolTip("sent as 'Authorization: Bearer …'; kept in the settings file in plain text")
        self.remote_api_key.editingFinished.connect(lambda: self._edit("remote_api_key", self.remote_api_key.text().strip()))
        self._wide_row(grid, "remote_api_key", "API key", self.remote_api_key, "optional")
        self.remote_model = QComboBox()
        self.remote_model.setEditable(True)
        self.remote_model.setProperty("editableText", True)
        model_edit = self.remote_model.lineEdit()
        assert model_edit is not None  # an editable combo box has one
        model_edit.setPlaceholderText("the server's first model")
        self.remote_model.setToolTip("the model name the server knows; Test connection lists them")
        model_edit.editingFinished.connect(self._remote_model_edited)
        self.remote_model.activated.connect(lambda _i: self._remote_model_edited())
        self._wide_row(grid, "remote_model", "Model", self.remote_model, "empty = the first one served")
        self.remote_timeout = QDoubleSpinBox()
        low, high, _ = self.rules.setting_range("remote_timeout")
        self.remote_timeout.setRange(low, high)
        self.remote_timeout.setDecimals(1)
        self.remote_timeout.setSingleStep(5)
        self.remote_timeout.setSuffix(" s")
        self.remote_timeout.setKeyboardTracking(False)
        self.remote_timeout.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.remote_timeout.setToolTip("how long to wait for the server's answer")
        self.remote_timeout.valueChanged.connect(lambda value: self._edit("remote_timeout", round(float(value), 1)))
        self._row(grid, "remote_timeout", "Timeout", self.remote_timeout, f"{low:g} – {high:g} s")
        self.remote_constraint = QComboBox()
        self.remote_constraint.addItems(list(self.rules.remote_constraints))
        self.remote_constraint.setToolTip(
            "how the server is asked to answer with a letter only:\n"
            "none: plain request · vllm: guided_choice · llama.cpp: a grammar"
        )
        self.remote_constraint.currentTextChanged.connect(lambda text: self._edit("remote_constraint", text))
        self._row(grid, "remote_constraint", "Answer constraint", self.remote_constraint, " · ".join(self.rules.remote_constraints))
        buttons = QHBoxLayout()
        self.test_button = QPushButton("Test connection")
        self.test_button.setToolTip("ask the server for its models and whether it returns logprobs")
        self.test_button.clicked.connect(self.test_connection_requested.emit)
        self.connect_button = QPushButton("Connect")
        self.connect_button.setToolTip("decide on this server from now on (again, after a failure)")
        self.connect_button.clicked.connect(self.connect_requested.emit)
        buttons.addWidget(self.test_button)
        buttons.addWidget(self.connect_button)
        buttons.addStretch(1)
        grid.addLayout(buttons, grid.rowCount(), 0, 1, 2)
        self.connection_status = QLabel("")
        self.connection_status.setObjectName("RangeHint")
        self.connection_status.setWordWrap(True)
        self.connection_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(self.connection_status, grid.rowCount(), 0, 1, 2)
        self._layout.addWidget(self.local_box)
        self._layout.addWidget(self.remote_box)

    def _build_overlay(self) -> None:
        """The overlay and the clipboard hotkey."""
        grid = self._section("COMPANION OVERLAY")
        self.overlay_enabled = self._check(grid, "overlay_enabled", "Show overlay", "a small always-on-top window with the last decision")
        self.opacity = QSlider(Qt.Orientation.Horizontal)
        low, high, _ = self.rules.setting_range("overlay_opacity")
        self.opacity.setRange(int(low * 100), int(high * 100))
        self.opacity.valueChanged.connect(lambda value: self._edit("overlay_opacity", value / 100))
        self._row(grid, "overlay_opacity", "Background opacity", self.opacity, "20 – 100%")
        self.click_through = self._check(grid, "overlay_click_through", "Click-through", "the overlay ignores the mouse (turn off to drag it)")
        self.hotkey = QKeySequenceEdit()
        self.hotkey.setMaximumSequenceLength(1)
        self.hotkey.setToolTip(CLIPBOARD_FORMAT)
        self.hotkey.editingFinished.connect(self._hotkey_edited)
        self._row(grid, "hotkey", "Clipboard hotkey", self.hotkey, "one key combination")
        self.hotkey_status = QLabel("")
        self.hotkey_status.setObjectName("RangeHint")
        self.hotkey_status.setWordWrap(True)
        self.hotkey_status.setToolTip(CLIPBOARD_FORMAT)
        grid.addWidget(self.hotkey_status, grid.rowCount(), 0, 1, 2)
        self._build_watch(grid)

    def _build_watch(self, grid: QGridLayout) -> None:
        """Watch mode: on/off, how often the screen is grabbed, how much it must change to re-decide."""
        self.watch_enabled = self._check(grid, "watch_enabled", "Watch the screen (Ctrl+Shift+W)",
                                         "grab the picked region (else the screen under the overlay) again and again and "
                                         "decide when the picture changed; nothing is grabbed while paused or locked")
        self.watch_interval = QSpinBox()
        low, high, _ = self.rules.setting_range("watch_interval_ms")
        self.watch_interval.setRange(int(low), int(high))
        self.watch_interval.setSingleStep(100)
        self.watch_interval.setSuffix(" ms")
        self.watch_interval.setKeyboardTracking(False)
        self.watch_interval.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.watch_interval.setToolTip("how often watch mode grabs the screen (a grab costs a few ms; a decision only "
                                       "when the picture changed)")
        self.watch_interval.valueChanged.connect(lambda value: self._edit("watch_interval_ms", int(value)))
        self._row(grid, "watch_interval_ms", "Grab every", self.watch_interval, self.rules.range_text("watch_interval_ms"))
        self.watch_threshold = QDoubleSpinBox()
        low, high, _ = self.rules.setting_range("watch_threshold")
        self.watch_threshold.setRange(low, high)
        self.watch_threshold.setDecimals(3)
        self.watch_threshold.setSingleStep(0.005)
        self.watch_threshold.setKeyboardTracking(False)
        self.watch_threshold.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.watch_threshold.setToolTip("how much the picture must change to decide again: the mean brightness "
                                        "difference of a 32×32 thumbnail (0.02 ≈ a new scene; noise is < 0.005)")
        self.watch_threshold.valueChanged.connect(lambda value: self._edit("watch_threshold", round(float(value), 3)))
        self._row(grid, "watch_threshold", "Change threshold", self.watch_threshold, self.rules.range_text("watch_threshold"))

    def _build_api(self) -> None:
        """The local API server."""
        grid = self._section("LOCAL API")
        self.api_enabled = self._check(grid, "api_enabled", "Serve local API", "an OpenAI-compatible server in the app; its decisions appear in the overlay")
        self.api_host = QLineEdit()
        self.api_host.editingFinished.connect(lambda: self._edit("api_host", self.api_host.text().strip()))
        self._row(grid, "api_host", "Host", self.api_host, "127.0.0.1 = this computer only")
        self.api_port = QSpinBox()
        low, high, _ = self.rules.setting_range("api_port")
        self.api_port.setRange(int(low), int(high))
        self.api_port.setKeyboardTracking(False)
        self.api_port.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.api_port.valueChanged.connect(lambda value: self._edit("api_port", value))
        self._row(grid, "api_port", "Port", self.api_port, self.rules.range_text("api_port"))
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.api_key.setPlaceholderText("none")
        self.api_key.setToolTip("clients send 'Authorization: Bearer …'; needed to listen beyond this computer.\n"
                                "Kept in the settings file in plain text.")
        self.api_key.editingFinished.connect(lambda: self._edit("api_key", self.api_key.text().strip()))
        self._wide_row(grid, "api_key", "API key", self.api_key, "optional on 127.0.0.1")
        self.api_origins = QLineEdit()
        self.api_origins.setPlaceholderText("none: web pages are refused")
        self.api_origins.setToolTip(
            "web pages allowed to call the local API from a browser, by origin (scheme, host, port),\n"
            "e.g. http://localhost:3000, separated by commas. A page not listed gets 403: any site you visit\n"
            "could otherwise drive the model. Programs and games (no browser Origin) are not affected."
        )
        self.api_origins.editingFinished.connect(self._origins_edited)
        self._wide_row(grid, "api_allowed_origins", "Allowed web pages", self.api_origins, "origins, comma-separated")
        self.api_status = QLabel("")
        self.api_status.setObjectName("RangeHint")
        self.api_status.setWordWrap(True)
        grid.addWidget(self.api_status, grid.rowCount(), 0, 1, 2)

    def _number(self, grid: QGridLayout, name: str) -> None:
        setting = SETTINGS[name]  # label, help, range, decimals and step: engine.settings' declaration
        decimals = setting.decimals
        low, high, integer = setting.range
        widget: QSpinBox | QDoubleSpinBox
        if integer:
            widget = QSpinBox()
            widget.setRange(int(low), int(min(high, 2**31 - 1)))
            widget.setSingleStep(int(setting.step))
            widget.valueChanged.connect(lambda value, n=name: self._edit(n, int(value)))
        else:
            widget = QDoubleSpinBox()
            widget.setDecimals(decimals)
            # (0, 1] for top_p: the smallest positive step stands in for the open end.
            widget.setRange(low + 10 ** -decimals if setting.low_open else low, high)
            widget.setSingleStep(setting.step)
            widget.valueChanged.connect(lambda value, n=name: self._edit(n, round(float(value), decimals)))
        widget.setKeyboardTracking(False)
        widget.setAlignment(Qt.AlignmentFlag.AlignRight)
        widget.setToolTip(_number_tip(name))
        self._row(grid, name, setting.label, widget, setting.range_text())

    def _choice(self, grid: QGridLayout, name: str) -> None:
        setting = SETTINGS[name]
        widget = QComboBox()
        for value in setting.choices:
            widget.addItem(value, value)
        widget.setProperty("byData", True)
        widget.setToolTip(setting.help)
        widget.currentIndexChanged.connect(lambda _i, n=name, w=widget: self._edit(n, w.currentData()))
        self._row(grid, name, setting.label, widget, setting.range_text(), width=150)

    def _seed(self, grid: QGridLayout) -> None:
        self.seed = QLineEdit()
        self.seed.setPlaceholderText("random")
        self.seed.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.seed.setToolTip("a fixed seed makes sampled draws repeatable; empty = a fresh seed per decision")
        self.seed.editingFinished.connect(self._seed_edited)
        self._row(grid, "seed", SETTINGS["seed"].label, self.seed, "empty = random")

    # ----- values -----
    def set_settings(self, settings: Settings) -> None:
        """Show these settings (no signals)."""
        self.settings = settings
        self._show_values(settings)
        self.reasoning_enabled()
        self.engine_visibility()

    def reasoning_enabled(self) -> None:
        self.fields["reasoning_budget"].setEnabled(self.settings.think)

    def engine_visibility(self) -> None:
        remote = self.settings.engine == "remote"
        self.local_box.setVisible(not remote)
        self.remote_box.setVisible(remote)

    def _edit(self, name: str, value: object) -> bool:
        """Apply one edit; refused (and shown) when the settings rules say no."""
        try:
            updated = self.settings.with_changes(**{name: value})
        except SettingsError as exc:
            self._show_error(name, str(exc))
            return False
        self._show_error(name, None)
        if updated == self.settings:
            return True
        self.settings = updated
        if name == "think":
            self.reasoning_enabled()
        if name == "engine":
            self.engine_visibility()
        self.settings_changed.emit(updated, name)
        return True

    def _seed_edited(self) -> None:
        text = self.seed.text().strip()
        if not text:
            self._edit("seed", None)
            return
        try:
            value = int(text)
        except ValueError:
            low, high, _ = SETTINGS["seed"].range
            self._show_error("seed", f"seed must be an integer in [{low}, {high}] or empty (got {text!r})")
            return
        self._edit("seed", value)

    def _remote_model_edited(self) -> None:
        self._edit("remote_model", self.remote_model.currentText().strip())

    def _origins_edited(self) -> None:
        if self._edit("api_allowed_origins", split_list(self.api_origins.text())):
            # as stored (and as browsers send them): lower case, no default port, no trailing slash
            self.api_origins.setText(LIST_SEPARATOR.join(self.settings.api_allowed_origins))

    def _hotkey_edited(self) -> None:
        sequence = self.hotkey.keySequence().toString(QKeySequence.SequenceFormat.PortableText)
        if not sequence:
            self.hotkey.setKeySequence(QKeySequence(self.settings.hotkey))
            return
        self._edit("hotkey", sequence)

    def set_value(self, name: str, value: object) -> bool:
        """Programmatic edit through the same validation as the widgets; the widgets follow."""
        ok = self._edit(name, value)
        if ok:
            self.set_settings(self.settings)
        return ok

    # ----- status lines -----
    def set_model_defaults(self, defaults) -> None:
        self._model_defaults = defaults
        self.defaults_button.setEnabled(defaults is not None)

    def set_capture_budget(self, budget: int | None) -> None:
        """Say on the image budget's field what a screen decision left at the default runs at on this machine."""
        field = self.fields.get("image_pixels")
        if field is None:
            return
        tip = _number_tip("image_pixels")
        if budget is not None:
            tip += (f"\n\nOn this machine, left at {IMAGE_PIXELS_DEFAULT:,}, a picture is scaled to {budget:,} pixels: "
                    "the largest budget whose screen decision fit 3 s here (measured by `decider doctor --tune`).")
        field.setToolTip(tip)

    def set_hotkey_status(self, text: str, ok: bool) -> None:
        self.hotkey_status.setText(text)
        set_role(self.hotkey_status, "RangeHint" if ok else "WarnText")

    def set_connection_status(self, text: str, ok: bool | None = None) -> None:
        """The remote connection line: None = neutral (testing…), True = fine, False = a problem."""
        self.connection_status.setText(text)
        set_role(self.connection_status, "RangeHint" if ok is None else "GoodText" if ok else "WarnText")

    def set_remote_models(self, models: list[str]) -> None:
        """Offer the server's models in the model field (keeping what is typed there)."""
        current = self.remote_model.currentText()
        self.remote_model.blockSignals(True)
        self.remote_model.clear()
        self.remote_model.addItems(models)
        self.remote_model.setEditText(current)
        self.remote_model.blockSignals(False)

    def set_testing(self, testing: bool) -> None:
        self.test_button.setEnabled(not testing)
        self.test_button.setText("Testing…" if testing else "Test connection")

    def set_api_status(self, text: str, available: bool = True) -> None:
        self.api_status.setText(text)
        self.fields["api_enabled"].setEnabled(available)


def _number_tip(name: str) -> str:
    """A numeric setting's field tooltip: what it does and its range."""
    setting = SETTINGS[name]
    return f"{setting.help}\nrange {setting.range_text()}"
