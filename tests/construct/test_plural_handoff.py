"""`construct build` output is input `plural label` accepts (the construct issue's hand-off).

The built prompts.jsonl goes, byte for byte, through the real ``carebench plural label``
CLI against the scripted labelling stub, with profiles calibrated and frozen on the
built-in data in the same test.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import yaml
from construct_stub import Pipeline

from carebench.cli import main
from carebench.construct.io import builtin_path as construct_builtin
from carebench.datasets.prompts import load_annotations, load_policies, load_prompts
from carebench.plural.data import builtin_path as plural_builtin
from carebench.plural.records import PromptInfo
from carebench.plural.release import leakage_exclusions
from carebench.taxonomy import load_contexts
from stub_server import StubServer

_PLURAL_TESTS = str(Path(__file__).parents[1] / "plural")
if _PLURAL_TESTS not in sys.path:
    sys.path.insert(0, _PLURAL_TESTS)
from labelling_stub import Labeller


def _build(tmp_path: Path, cache: Path) -> Path:
    """`construct build` on the built-in illustrative set against the construct stub."""
    with StubServer() as stub:
        stub.handler = Pipeline()
        m = lambda name: f"openai:{name}@{stub.base_url}"
        (tmp_path / "literals.txt").write_text("forum_sg\n", "utf-8")
        cfg = tmp_path / "build.yaml"
        cfg.write_text(yaml.safe_dump({
            "router": m("router"), "judge": m("judge"), "rewriters": [m("good"), m("plain")],
            "literals": str(tmp_path / "literals.txt"), "embedder": "hashing"}), "utf-8")
        out = tmp_path / "build"
        assert main(["construct", "build", "--config", str(cfg), "--out", str(out), "--cache", str(cache)]) == 0
    return out / "prompts.jsonl"


def test_built_prompts_are_labelled_by_plural_label(tmp_path, capsys):
    cache = tmp_path / "cache.sqlite"
    built_path = _build(tmp_path, cache)

    # the exact loader `plural label` uses: ids unique, every context one the suite knows
    built = load_prompts(built_path)
    assert built
    # provenance, from the construct source rows alone: row id -> original post and dataset
    sources = [json.loads(line) for line in construct_builtin("sources").read_text("utf-8").splitlines()]
    post_of = {r["id"]: r.get("source_id", r["id"]) for r in sources}
    dataset_of = {r["id"]: r["source"] for r in sources}
    assert all(p.source_id == post_of[p.row_id] and p.source_group == dataset_of[p.row_id] for p in built)
    # two prompts from one post are siblings for the leakage rule
    by_post = defaultdict(list)
    for p in built:
        by_post[p.source_id].append(p.id)
    pair = next(sorted(v) for v in by_post.values() if len(v) >= 2)
    leak = leakage_exclusions(built, {pair[0]})
    assert leak.calibration == [pair[0]] and pair[1] in leak.siblings
    assert len({p.id for p in built}) == len(built)
    assert {p.context for p in built} <= set(load_contexts())

    # profiles calibrated and frozen on the built-in calibration set
    plural_prompts = load_prompts(plural_builtin("prompts.jsonl"))
    annotations = load_annotations(plural_builtin("annotations.jsonl"))
    cal_ids = {a.case_id for a in annotations}
    labeller = Labeller([*plural_prompts, *built], annotations)
    with StubServer() as stub:
        stub.handler = labeller
        common = ["--cache", str(cache)]
        cal, frz, lab = tmp_path / "cal", tmp_path / "freeze", tmp_path / "label"
        assert main(["plural", "calibrate", "--model", f"openai:labeller@{stub.base_url}", "--out", str(cal),
                     "--bootstrap", "50", *common]) == 0
        assert main(["plural", "freeze", "--calibration", str(cal), "--out", str(frz), *common]) == 0

        # `plural label` needs the profiles' calibration cases among its prompts (their
        # memories show them): add them, with their source ids moved into a namespace of
        # their own so the built-in set's "src-NNN" ids do not mark the built prompts as
        # siblings of a calibration case. One of them is made from the same post as two
        # built prompts: those are its siblings and must be excluded. The built file's
        # lines are copied unchanged.
        posts = defaultdict(list)  # original post -> built prompts, from the source rows alone
        for p in built:
            posts[post_of[p.row_id]].append(p.id)
        shared_post, siblings = next((k, sorted(v)) for k, v in sorted(posts.items()) if len(v) >= 2)
        cal_lines = [json.dumps(p.model_dump(mode="json") | {"source_id": f"plural/{p.source_id}",
                                                             "source_group": f"plural/{p.source_id}"})
                     for p in plural_prompts if p.id in cal_ids]
        first = json.loads(cal_lines[0])
        cal_lines[0] = json.dumps(first | {"source_id": shared_post})
        # a calibration case every practitioner skipped: in no profile's fit cases, but in the
        # calibration set, so excluded for leakage all the same
        skipped = _all_skip(frz, built, siblings)
        combined = tmp_path / "combined.jsonl"
        combined.write_text("\n".join(cal_lines) + "\n" + built_path.read_text("utf-8"), "utf-8")
        capsys.readouterr()
        rc = main(["plural", "label", "--profiles", str(frz), "--prompts", str(combined), "--out", str(lab),
                   *common])
        assert rc == 0, capsys.readouterr().err

    built_ids = {p.id for p in built}
    expected = built_ids - set(siblings) - {skipped}
    metrics = json.loads((lab / "metrics.json").read_text("utf-8"))
    assert metrics["excluded_for_leakage"]["calibration"] == len(cal_ids) + 1  # + the skipped case
    assert metrics["excluded_for_leakage"]["sharing_source"] == len(siblings)
    records = [json.loads(line) for line in (lab / "records.jsonl").read_text("utf-8").splitlines()]
    policy = [r for r in records if r["type"] == "policy"]
    profiles = {r["profile"] for r in policy}
    assert len(profiles) == 6
    # every other built prompt labelled once by every profile, and nothing else labelled
    assert sorted((r["prompt_id"], r["profile"]) for r in policy) == sorted(
        (i, a) for i in expected for a in profiles)
    # the stub answers every built prompt with a valid policy: all of them are released
    release = lab / "release"
    released = load_prompts(release / "prompts.jsonl")
    assert {p.id for p in released} == expected
    assert [p.model_dump() for p in sorted(released, key=lambda p: p.id)] == [
        p.model_dump() for p in sorted(built, key=lambda p: p.id) if p.id in expected]
    assert len(load_policies(release / "policies.jsonl")) == len(expected) * len(profiles)
    # the bootstrap resamples whole posts: one cluster per distinct original post
    groups = {PromptInfo.of(p).source_id for p in built}
    assert len(groups) == len(posts) == len({post_of[p.row_id] for p in built})
    assert len(groups) < len(built)  # some posts gave several prompts


def _all_skip(freeze_dir: Path, built: list, avoid: list[str]) -> str:
    """Turn one built prompt into a calibration case every practitioner skipped: it joins
    each frozen profile's calibration set but no profile learnt from it (re-hashed)."""
    from carebench.plural.profiles.base import Profile

    case = next(p.id for p in sorted(built, key=lambda p: p.id) if p.id not in avoid)
    for f in sorted((freeze_dir / "profiles").glob("*.json")):
        d = json.loads(f.read_text("utf-8"))
        d.pop("hash")
        assert case not in d["fit_cases"] and d["calibration_cases"]
        d["calibration_cases"] = sorted([*d["calibration_cases"], case])
        f.write_text(json.dumps({**d, "hash": Profile.from_dict(d).content_hash()}), "utf-8")
    return case
