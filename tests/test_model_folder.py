"""Bad model folders: one ModelError per problem, naming the file."""

import json
import shutil

import pytest

from support.models import model_dir
from decider.engine.core.errors import ModelError
from decider.engine.model.folder import inspect_folder
from decider.engine.runners.runner import ModelRunner


@pytest.fixture
def folder(tmp_path):
    target = tmp_path / "model"
    shutil.copytree(model_dir("qwen35-text"), target)
    return target


@pytest.fixture
def vl_folder(tmp_path):
    target = tmp_path / "vl"
    shutil.copytree(model_dir("qwen35-vl"), target)
    return target


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def test_good_folders_are_recognised(folder, vl_folder):
    assert inspect_folder(folder).layout == "text"
    vl = inspect_folder(vl_folder)
    assert vl.layout == "vl" and vl.embeddings_ir.name == "openvino_text_embeddings_model.xml"


def test_not_a_folder(tmp_path):
    with pytest.raises(ModelError, match="nope: not a folder"):
        inspect_folder(tmp_path / "nope")


@pytest.mark.parametrize("missing", ["config.json", "openvino_model.xml", "openvino_model.bin", "tokenizer.json"])
def test_missing_file_is_named(folder, missing):
    (folder / missing).unlink()
    with pytest.raises(ModelError, match=rf"{missing}: missing file"):
        inspect_folder(folder)


def test_missing_embeddings_model_in_vl_layout(vl_folder):
    (vl_folder / "openvino_text_embeddings_model.bin").unlink()
    with pytest.raises(ModelError, match="openvino_text_embeddings_model.bin: missing file"):
        inspect_folder(vl_folder)


def test_truncated_bin(folder):
    bin_path = folder / "openvino_model.bin"
    data = bin_path.read_bytes()
    bin_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match=r"openvino_model.bin: truncated \(\d+ bytes, the IR needs \d+\)"):
        inspect_folder(folder)


def test_unknown_model_type(folder):
    edit_config(folder, model_type="llama")
    with pytest.raises(ModelError, match="config.json: unknown model_type 'llama'"):
        inspect_folder(folder)


def test_config_not_json(folder):
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="config.json: not valid JSON"):
        inspect_folder(folder)


def test_xml_that_is_not_an_ir(folder):
    (folder / "openvino_model.xml").write_text("<html></html>")
    with pytest.raises(ModelError, match="openvino_model.xml: not an OpenVINO IR"):
        inspect_folder(folder)


def test_vocab_size_that_does_not_match_the_logits(folder):
    edit_config(folder, vocab_size=999)
    with pytest.raises(ModelError, match="config.json: vocab_size 999 does not match the model's 1856 logits"):
        ModelRunner(folder)


def test_tokenizer_that_does_not_match_the_vocabulary(folder):
    spec = json.loads((folder / "tokenizer.json").read_text())
    next_id = max(t["id"] for t in spec["added_tokens"]) + 1
    for i in range(300):
        spec["added_tokens"].append({"id": next_id + i, "content": f"<extra_{i}>", "single_word": False,
                                     "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ModelError, match=r"tokenizer.json: tokenizer has \d+ tokens but the model has only 1856 logits"):
        ModelRunner(folder)


def test_tokenizer_without_qwen_chat_tokens(folder):
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] != "<|im_end|>"]
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ModelError, match=r"tokenizer.json: tokenizer lacks Qwen chat tokens <\|im_end\|>"):
        ModelRunner(folder)


def test_broken_tokenizer_file(folder):
    (folder / "tokenizer.json").write_text("[]")
    with pytest.raises(ModelError, match="tokenizer.json: cannot load tokenizer"):
        ModelRunner(folder)
