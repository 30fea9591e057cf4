"""bench/versus.py, the loop bench/w_torch.py and bench/w_llama.py share, on a fixture model: a peer reading its
decision off raw last-position logits (here OpenVINO through a second runner, the real thing) agrees with
Decider's own decision, and the entry carries what the report's tables read."""

from bench import prompts as bench_prompts
from bench.versus import letter_decision, versus
from support.models import model_dir


def test_a_peer_on_the_same_weights_agrees_with_decider(tmp_path):
    from decider.engine.compile.devices import DeviceOptions
    from decider.engine.runners.runner import ModelRunner

    folder = model_dir("qwen35-text")
    prompts = bench_prompts.build(folder / "tokenizer.json", tmp_path / "prompts.json")
    runner, peer = ModelRunner(folder, DeviceOptions(exact=True)), ModelRunner(folder, DeviceOptions(exact=True))

    def peer_decision(ids):
        peer.reset()
        return letter_decision(peer.prefill(ids), prompts["vocab"], prompts["letters"])

    entry = versus("peer", peer_decision, runner, prompts, 64, repeats=2, warmup=True)
    assert entry["peer_s"]["n"] == 2 and entry["decider_s"]["n"] == 2 and entry["ratio"]["n"] == 2
    assert entry["same_choice"] is True
    assert entry["max_logprob_diff"] < 1e-4 and entry["max_probability_diff"] < 1e-4
    assert abs(sum(entry["peer"]["probabilities"]) - 1.0) < 1e-9 and len(entry["peer"]["logprobs"]) == len(prompts["options"])
    alone = versus("peer", peer_decision, None, prompts, 64, repeats=1, warmup=False)
    assert set(alone) == {"peer_s", "peer"} and alone["peer_s"]["n"] == 1
