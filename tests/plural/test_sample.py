"""The diagnostic sample: reserved severity levels, rarity weighting, size (VEILED-SH, §5.3)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from carebench.plural.sample import PolicySampleConfig, draw_sample, prompt_features, rarity_weights


def _release(n=40):
    prompts = [NS(id=f"p{i:02d}", context="forum" if i % 4 else "triage", source_group="g1" if i % 5 else "g2")
               for i in range(n)]
    policies = []
    for i in range(n):
        for prof in ("P1", "C1"):
            policies.append(NS(prompt_id=f"p{i:02d}", profile=prof, intent=["INTENT_1"], function=["FUNCTION_U"],
                               nssi_severity=None, suicidal_severity=None))
    # rare levels: one prompt at suicidal 5 (only under C1), two at NSSI 2
    policies[2 * 17 + 1].suicidal_severity = 5
    policies[2 * 17 + 1].intent = ["INTENT_3"]
    policies[2 * 3].nssi_severity = 2
    policies[2 * 8].nssi_severity = 2
    return prompts, policies


def test_size_follows_the_papers_fraction():
    assert PolicySampleConfig().target(10_003) == 2001
    assert PolicySampleConfig(size=50).target(30) == 30


def test_every_severity_level_present_is_reserved_first():
    prompts, policies = _release()
    sample = draw_sample(prompts, policies, PolicySampleConfig(size=6, seed=1))
    ids = [s.prompt_id for s in sample]
    assert len(ids) == len(set(ids)) == 6
    assert "p17" in ids  # the only suicidal-5 prompt
    assert {"p03", "p08"} & set(ids)  # one of the two NSSI-2 prompts
    assert sample[0].reason.startswith("reserved")
    assert draw_sample(prompts, policies, PolicySampleConfig(size=6, seed=1)) == sample  # seeded


def test_rarity_weights_by_hand():
    prompts = [NS(id=f"p{i}", context=c, source_group="g") for i, c in enumerate(["forum", "forum", "forum", "triage"])]
    pols = [NS(prompt_id=p.id, intent=["INTENT_1"], function=["FUNCTION_1"], nssi_severity=None,
               suicidal_severity=None) for p in prompts]
    feats = prompt_features(prompts, pols)
    w = rarity_weights([p.id for p in prompts], feats)
    # context scores 4/3 (forum) and 4 (triage), mean 2 -> 2/3 and 2; other features 1
    np.testing.assert_allclose(w, [(2 / 3 + 3) / 4] * 3 + [(2 + 3) / 4])
    np.testing.assert_allclose(rarity_weights([p.id for p in prompts], feats, weighting=0), 1.0)


def test_weighting_favours_uncommon_contexts():
    prompts, policies = _release()

    def triage_share(weighting):
        hits = [int(s.prompt_id[1:]) % 4 == 0 for seed in range(60)
                for s in draw_sample(prompts, policies, PolicySampleConfig(size=8, seed=seed, reserve=0,
                                                                     weighting=weighting))]
        return sum(hits) / len(hits)

    # 10 triage vs 30 forum prompts: a uniform draw gives triage a 1/4 share
    assert abs(triage_share(0.0) - 0.25) < 0.05
    assert triage_share(3.0) > 0.35


def test_bad_settings_are_user_errors():
    prompts, policies = _release()
    from carebench.types import CarebenchError

    with pytest.raises(CarebenchError, match="fraction"):
        draw_sample(prompts, policies, PolicySampleConfig(fraction=0))
