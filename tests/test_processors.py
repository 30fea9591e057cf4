"""Logits processors: penalties told which tokens were kept, the allowed-token mask, the chain's order."""

from collections import deque

import numpy as np
import pytest

from decider.engine.generation import processors
from decider.engine.model.chat_template import Message, build_chat_prompt
from decider.engine.generation.generate import generate_step, make_rng
from decider.engine.generation.processors import AllowedTokens, LogitsProcessor, Penalties, check_order, make_processors, run_processors
from decider.engine.generation.sampling import make_sampler
from decider.engine.core.settings import SamplingSettings

PENALISED_GREEDY = SamplingSettings(temperature=0.0, frequency_penalty=1.0, presence_penalty=1.5)


def greedy():
    return make_sampler(PENALISED_GREEDY, make_rng(0))


def test_repetition_penalty_is_ctrl_style():
    logits = np.array([2.0, -2.0, 1.0, 0.5])
    out = processors.apply_penalties(logits, [0, 1], repetition=2.0, frequency=0.0, presence=0.0)
    assert out.tolist() == [1.0, -4.0, 1.0, 0.5]
    assert logits.tolist() == [2.0, -2.0, 1.0, 0.5], "stages must not modify their input"


def test_frequency_and_presence_follow_openai():
    logits = np.zeros(5)
    out = processors.apply_penalties(logits, [3, 3, 3, 1], repetition=1.0, frequency=0.5, presence=1.5)
    assert out[3] == pytest.approx(-(3 * 0.5 + 1.5))
    assert out[1] == pytest.approx(-(0.5 + 1.5))
    assert out[0] == out[2] == out[4] == 0.0


def test_penalties_apply_repetition_before_frequency():
    out = processors.apply_penalties(np.array([3.0]), [0], repetition=1.5, frequency=1.0, presence=0.0)
    assert out[0] == pytest.approx(3.0 / 1.5 - 1.0)


def test_constraint_masks_everything_else():
    out = processors.constrain(np.arange(6.0), np.array([1, 4]))
    assert np.isfinite(out).tolist() == [False, True, False, False, True, False]


def test_penalties_count_only_accepted_tokens_within_their_window():
    penalties = Penalties(repetition=1.0, frequency=1.0, presence=0.5, window=deque(maxlen=2))
    logits = np.zeros(4)
    assert penalties.apply(logits) is logits  # nothing kept yet: no copy
    for token in (0, 1, 1):
        penalties.accept(token)
    out = penalties.apply(logits)
    assert list(penalties.window) == [1, 1]  # token 0 left the window
    assert out.tolist() == [0.0, -2.5, 0.0, 0.0]


def test_penalties_for_sampling_continue_a_given_window():
    window = deque([3], maxlen=8)
    penalties = Penalties.for_sampling(PENALISED_GREEDY, window)
    penalties.accept(2)
    assert penalties.window is window and list(window) == [3, 2]
    assert Penalties.for_sampling(PENALISED_GREEDY).window.maxlen == PENALISED_GREEDY.penalty_window


def test_the_chain_hands_out_logits_before_and_after_the_masks():
    chain = make_processors(PENALISED_GREEDY, allowed=[1, 2])
    assert [type(p) for p in chain] == [Penalties, AllowedTokens]
    chain[0].accept(1)
    adjusted, scored, drawn = run_processors(chain, np.array([1.0, 2.0, 3.0, 4.0]))
    assert adjusted.tolist() == [1.0, 2.0 - 2.5, 3.0, 4.0]
    assert scored.tolist() == drawn.tolist() == [-np.inf, 2.0 - 2.5, 3.0, -np.inf]


class _DrawOnly(AllowedTokens):
    draw_only = True


def test_a_draw_only_mask_restricts_the_draw_but_not_the_logprobs(text_runner):
    logits = np.array([1.0, 2.0, 3.0, 4.0])
    adjusted, scored, drawn = run_processors([AllowedTokens([0, 1, 2]), _DrawOnly([0])], logits)
    assert adjusted is logits
    assert scored.tolist() == [1.0, 2.0, 3.0, -np.inf] and drawn.tolist() == [1.0, -np.inf, -np.inf, -np.inf]
    prompt = _prompt(text_runner, "Pick one")
    free = next(generate_step(text_runner, prompt, greedy(), max_tokens=1, top_logprobs=3,
                              processors=make_processors(PENALISED_GREEDY)))
    other = next(i for i in range(100, 200) if i != free.token_id)
    chain = make_processors(PENALISED_GREEDY) + [_DrawOnly([other])]
    forced = next(generate_step(text_runner, prompt, greedy(), max_tokens=1, top_logprobs=3,
                                processors=chain))
    assert forced.token_id == other
    assert forced.entry.top == free.entry.top  # the model's own distribution, not the mask's
    assert forced.entry.logprob < free.entry.logprob


def test_an_adjusting_processor_after_a_mask_is_refused():
    with pytest.raises(ValueError, match="out of order"):
        check_order([AllowedTokens([1]), Penalties.for_sampling(PENALISED_GREEDY)])
    with pytest.raises(ValueError, match="out of order"):
        check_order([_DrawOnly([1]), AllowedTokens([1])])


class _Unfinished:
    """Everything a processor needs but `finished`: the loop used to ask for it with getattr and a default."""

    masks = draw_only = False

    def apply(self, logits):
        return logits

    def accept(self, token):
        pass


def test_a_processor_without_the_declared_interface_is_refused():
    from decider.engine.generation.logit_bias import LogitBias

    with pytest.raises(TypeError, match="_Unfinished is not a logits processor: it has no finished"):
        check_order([Penalties.for_sampling(PENALISED_GREEDY), _Unfinished()])
    with pytest.raises(TypeError, match="it has no finished"):
        next(generate_step(None, [1], greedy(), max_tokens=1, processors=[_Unfinished()]))  # before any forward
    every_kind = [*make_processors(PENALISED_GREEDY, allowed=[1], logit_bias=((1, 2.0),)), _DrawOnly([1])]
    assert all(isinstance(p, LogitsProcessor) and p.finished is False for p in every_kind)
    assert [type(p) for p in every_kind] == [Penalties, LogitBias, AllowedTokens, _DrawOnly]
    check_order(every_kind)


def _prompt(runner, text):
    return build_chat_prompt(runner.tokenizer, [Message("user", text)], False).ids


def test_an_end_token_is_kept_text_but_ends_the_phase(text_runner):
    prompt = _prompt(text_runner, "Hello there")
    free = list(generate_step(text_runner, prompt, greedy(), max_tokens=4, processors=make_processors(PENALISED_GREEDY)))
    end = free[1].token_id
    penalties = Penalties.for_sampling(PENALISED_GREEDY)
    ended = list(generate_step(text_runner, prompt, greedy(), max_tokens=4,
                               processors=[penalties], end_ids=frozenset({end})))
    assert [s.token_id for s in ended] == [free[0].token_id, end]
    assert list(penalties.window) == [free[0].token_id, end]  # accepted, unlike a stop token
    assert text_runner.history == list(prompt) + [free[0].token_id]  # but never fed


def test_a_grammar_mask_plugs_into_the_chain_as_a_draw_only_processor(text_runner):
    import json

    pytest.importorskip("llguidance")
    from decider.engine.constrained.structured import GrammarMask, GrammarTokenizer, ResponseFormat

    tok = text_runner.tokenizer
    schema = {"type": "json_schema", "json_schema": {"schema": {
        "type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"], "additionalProperties": False}}}
    grammar = GrammarMask(ResponseFormat.from_openai(schema), GrammarTokenizer.for_file(text_runner.folder.tokenizer_json, (tok.im_end,)), tok.size)
    chain = make_processors(PENALISED_GREEDY) + [grammar]
    prompt = _prompt(text_runner, "Go?")
    steps = list(generate_step(text_runner, prompt, greedy(), max_tokens=20, top_logprobs=1,
                               processors=chain, stop_ids=tok.stop_ids))
    kept = [s.token_id for s in steps if s.token_id not in tok.stop_ids]
    assert json.loads(tok.decode(kept)) in ({"go": True}, {"go": False})
    assert list(chain[0].window) == kept  # the penalties saw the same kept tokens as the grammar


def test_generate_step_takes_settings_or_a_sampler_never_both_ways_at_once(text_runner):
    """Settings make their own sampler and processors (allowed=/window= shape them); a sampler comes with
    processors as given. Mixing the two is a caller's mistake, refused before any forward."""
    from decider.engine.generation.generate import generate_step, make_rng
    from decider.engine.generation.sampling import make_sampler

    with pytest.raises(TypeError):
        next(generate_step(text_runner, [1], PENALISED_GREEDY, make_rng(0), max_tokens=1, processors=[]))
    with pytest.raises(TypeError):
        next(generate_step(text_runner, [1], make_sampler(PENALISED_GREEDY, make_rng(0)), max_tokens=1, allowed=[1]))
