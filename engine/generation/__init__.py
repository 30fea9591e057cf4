"""The token loop on top of a runner: one step after another with the processors between the logits and the draw
(generate.py, step.py, processors.py, logit_bias.py), the samplers (sampling.py), and drafted tokens verified in one
forward (drafts.py: prompt lookup, mtp_drafts.py: the MTP head's, drafter_choice.py, speculative.py). It knows runners only by RunnerBase; it knows nothing of decisions.
"""
