"""The converse suite in the run skeleton: generate -> judge (walk the tree) -> score -> report.

Three commands write converse run directories and one suite scores and renders them
all, so ``carebench report DIR`` and ``converse rescore`` work the same on each:

- ``run``: simulated conversations, then the rubric walks, then scores;
- ``judge``: the rubric walks of an earlier run's conversations (with other judges or
  another rubric), in a new directory;
- ``import-vera``: VERA-MH ``results.csv`` files read as walks (no calls).

Records: ``kind: conversation`` (the transcript and its status) and ``kind: walk``
(one per conversation and judge: the questions asked, the answers and reasons, the
ratings); with ``--simulator-questions``, ``kind: simulator_questions`` (the judge's
answers on the simulated user, one per conversation). Harness failures (a call that failed
after every retry) and judge failures (an unparseable answer) are counted in the manifest
and the report and never rated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from carebench.compare.outline import write_outline
from carebench.converse.compare import ConverseComparer
from carebench.converse.generation import (
    ASSISTANT_PROMPT,
    HARNESS_FAILURE,
    STOP_MARKER,
    TURN_UNITS,
    Conversation,
    GenerationConfig,
    generate,
)
from carebench.converse.generation import planned_calls as planned_generation
from carebench.converse.judging import (
    CRITERIA_STAGE,
    JUDGE_CALL_FAILURE,
    JUDGE_MAX_TOKENS,
    MODES,
    REQUIRED_SLOTS,
    Prompts,
    fallback_summary,
    judge_conversations,
    judge_criteria,
    planned_criteria_calls,
)
from carebench.converse.judging import planned_calls as planned_judging
from carebench.converse.personas import (
    BUILTIN,
    annotate_conversations,
    default_template,
    load_personas,
    persona_prompt,
    personas_from,
)
from carebench.converse.rubric import Rubric, load_bundle, load_rubric, parse_rules, rules_record
from carebench.converse.scoring import (
    B_DEFAULT,
    SEED_DEFAULT,
    rated_walks,
    scored_criteria,
    summarize,
    summarize_criteria,
)
from carebench.converse.simulator_checks import simulator_summary
from carebench.criteria import SCOPES
from carebench.datasets.files import read_text
from carebench.datasets.selection import select_ids
from carebench.engine.options import RunOptions, run_options
from carebench.engine.run import Run
from carebench.engine.rundir import (
    data_sha256,
    file_sha256,
    read_jsonl,
)
from carebench.engine.skeleton import (
    Execution,
    Plan,
    incomplete_metrics,
    incomplete_report,
    run_suite,
    stage,
)
from carebench.judging import panel_seats
from carebench.models.base import SpecLike, spec_texts
from carebench.report import Report
from carebench.resources.options import run_locale
from carebench.types import CarebenchError

SUITE = "converse"
#: ``--judge-prompts``: a ``vera:`` target's own judge prompts when it has them, or carebench's
JUDGE_PROMPTS = ("target", "carebench")
#: what a conversation is judged against: the rubric's decision tree (VERA-MH), or the
#: support task's own weighted criteria (``--criteria task``, personas from support tasks)
CRITERIA = ("tree", "task")


@dataclass
class Inputs:
    """The rubric and prompts a run uses (from files, a bundle, or the defaults)."""

    rubric: Rubric
    prompts: Prompts
    personas_source: str
    persona_template: str
    #: ``--rubric vera:PATH``: the VERA-MH files read and their hashes
    vera: dict[str, Any] | None = None
    #: which judge prompts the run uses, for the manifest (``dataset.judge_prompts``)
    judge_prompts: dict[str, Any] = field(default_factory=lambda: {"used": "carebench"})
    #: a ``vera:`` target's ``persona_annotation_columns``: the scores are broken down by them
    annotation_columns: list[str] = field(default_factory=list)

    @classmethod
    def without_rubric(cls, personas: str | None, persona_template: str | None) -> Inputs:
        """``--criteria task``: no tree; the personas and their prompt only."""
        return cls(None, Prompts.default(), personas or BUILTIN,  # type: ignore[arg-type]
                   read_text(persona_template) if persona_template else default_template())

    @classmethod
    def load(cls, rubric: str | None, personas: str | None = None, persona_template: str | None = None,
             judge_system: str | None = None, judge_question: str | None = None,
             rules: str | None = None, judge_prompts: str = "target", bundle: Any = None) -> Inputs:
        if rubric is None:
            raise CarebenchError("give --rubric (a VERA-MH rubric TSV, a YAML rubric, a bundle directory, or "
                                 "vera:PATH for VERA-MH's own files)")
        path = Path(rubric)
        prompts = Prompts.default()
        if rubric.startswith("builtin:"):
            path = None  # type: ignore[assignment]
        tmpl = None
        src = personas
        vera = None
        used: dict[str, Any] = {"used": "carebench"}
        cols: list[str] = []
        if judge_prompts not in JUDGE_PROMPTS:
            raise CarebenchError(f"--judge-prompts must be one of {', '.join(JUDGE_PROMPTS)}, got {judge_prompts!r}")
        if rubric.startswith("vera:"):
            from carebench.converse.vera_bundle import load_vera_bundle

            vb = bundle or load_vera_bundle(rubric)  # a --vera-config's target, already read
            rub, tmpl, vera = vb.rubric, vb.persona_template, vb.provenance()
            src = src or (str(vb.personas) if vb.personas else None)
            cols = vb.annotation_columns
            if judge_system or judge_question:
                pass  # the files given (below)
            elif judge_prompts == "target" and vb.has_judge_prompts:
                prompts = Prompts(vb.judge_system, vb.judge_question, style="vera")  # type: ignore[arg-type]
                used = {"used": "target", "files": vb.judge_files}
            else:
                used = {"used": "carebench", "target_files": vb.judge_files,
                        "why": "--judge-prompts carebench" if judge_prompts == "carebench" else
                        "the target folder has no judge prompt files"}
        elif path is not None and path.is_dir():
            b = load_bundle(path)
            rub = b.rubric
            prompts = Prompts(b.judge_system or prompts.system, b.judge_question or prompts.question)
            tmpl = b.persona_template
            src = src or (str(b.personas) if b.personas else None)
        else:
            rub = load_rubric(rubric)
        if rules is not None:  # the rubric's walking rules, overriding its own (see rubric.parse_rules)
            rub = replace(rub, rules=parse_rules(rules))
        if judge_system or judge_question:  # carebench-style templates, whatever the bundle had
            used = {"used": "files", "system": judge_system, "question": judge_question}
            base = prompts if prompts.style == "carebench" else Prompts.default()
            prompts = Prompts(read_text(judge_system) if judge_system else base.system,
                              read_text(judge_question) if judge_question else base.question)
        if persona_template:
            tmpl = read_text(persona_template)
        from carebench.templates import placeholders

        lacking = [s for s in REQUIRED_SLOTS if s not in placeholders(prompts.question)]
        if lacking and prompts.style != "vera":
            raise CarebenchError(f"the judge question template has no {{{lacking[0]}}} placeholder "
                                 f"(it needs {', '.join('{' + s + '}' for s in REQUIRED_SLOTS)})")
        return cls(rub, prompts, src or BUILTIN, tmpl or default_template(), vera, used, cols)


@dataclass
class ConverseConfig:
    rubric: str | None = None
    #: the rubric's walking rules ("vera", "carebench", "vera+OPTION..."): None keeps the rubric's own
    rubric_rules: str | None = None
    personas: str | None = None
    #: build personas from the seeds' cases: "support-tasks" or "plural-prompts" (``personas``
    #: is then that file, default builtin:sample)
    personas_from: str | None = None
    persona_template: str | None = None
    judge_system: str | None = None
    judge_question: str | None = None
    #: ``--judge-prompts``: "target" (a ``vera:`` target's own judge prompts when it has them) or
    #: "carebench" (carebench's, as for any other rubric)
    judge_prompts: str = "target"
    #: ``--vera-config FILE``: the VERA-MH run config this run replays (path, sha256, the
    #: settings not honoured, and the checkout its paths resolve against)
    vera_config: dict[str, Any] | None = None
    #: the models: the ``ModelSpec`` objects the command line was parsed into (a spec's text, e.g.
    #: a script's, is parsed by ``Run.model``); the manifest holds their text (``manifest_config``)
    simulators: list[SpecLike] = field(default_factory=list)
    chatbots: list[SpecLike] = field(default_factory=list)
    judges: list[SpecLike] = field(default_factory=list)
    system_prompt_file: str | None = None
    #: most turns per conversation (None: 20 exchanges, or 30 messages under the VERA-MH protocol)
    turns: int | None = None
    repeats: int = 1
    persona_ids: list[str] | None = None
    seed: int = SEED_DEFAULT
    bootstrap: int = B_DEFAULT
    temperature: float = 0.7
    max_tokens: int = 1024
    simulator_max_tokens: int = 512
    judge_temperature: float = 0.0
    judge_max_tokens: int = JUDGE_MAX_TOKENS
    #: ask for the judge's reason beside each answer (question mode); the demo turns it off
    judge_reasons: bool = True
    #: "question" (one call per question, VERA-MH's protocol) or "dimension" (one per dimension)
    judge_mode: str = "question"
    #: judge an earlier run's conversations instead of generating (``converse judge``)
    from_run: str | None = None
    #: judge conversations from elsewhere (``converse judge --transcripts``): JSONL or VERA-MH files
    transcripts: str | None = None
    #: the name of the system that wrote a transcript's replies (``--chatbot`` of ``converse judge``)
    transcripts_chatbot: str | None = None
    #: "tree" (walk the rubric) or "task" (the support task's own criteria, support's panel)
    criteria: str = "tree"
    #: ``--criteria task``: credit for any assistant turn ("anywhere", default) or the last only
    criteria_scope: str = "anywhere"
    #: "carebench" or "vera": the defaults of the options below (None: vera for ``vera:`` rubrics)
    protocol: str | None = None
    #: what --turns counts: "exchanges" or "messages" (VERA-MH's -t); None: the protocol's
    turn_unit: str | None = None
    #: the chatbot writes the first message
    provider_speaks_first: bool = False
    #: the per-turn reminder of the persona's role in the simulator's view; None: the protocol's
    persona_reminder: bool | None = None
    #: session labels played in order per persona and repeat (each its own conversation)
    sessions: list[str] = field(default_factory=list)
    #: stop a conversation once its messages hold this many words (after a chatbot reply)
    max_total_words: int | None = None
    #: without --system-prompt: "none" or "assistant" (a one-line helpful-assistant prompt, as
    #: VERA-MH sends); None: the protocol's
    default_system_prompt: str | None = None
    title: str = "Converse: simulated conversations judged with a decision-tree rubric"
    notes: list[str] = field(default_factory=list)
    #: --locale: the BCP-47 locale of every persona without its own (None: such personas have none)
    locale: str | None = None
    #: --resources: the crisis-resource registry the chatbot's turns are checked against (None: built-in)
    resources: str | None = None
    #: ``--judge-from CALIBRATION_DIR``: the selection a judge came from (recorded in the config)
    judge_from: dict[str, Any] | None = None
    #: ``--simulator-questions``: judge questions on the simulated user (role-reversal,
    #: risk-consistency); empty: none asked
    simulator_questions: list[str] = field(default_factory=list)
    #: ``--simulator-judge``: the model that answers them (None: the first judge)
    simulator_judge: SpecLike | None = None
    #: ``--drift RUBRIC``: rate every chatbot turn on the drift rubric ("builtin" or a YAML file);
    #: None: no drift ratings (docs/converse.md, "Drift over a conversation")
    drift: str | None = None
    #: ``--engagement``: how each chatbot turn gets its engagement class: "prefilter" (no model
    #: call, so a run's calls stay VERA-MH's protocol) or "judge" (docs/converse.md, "Engagement")
    engagement: str = "prefilter"
    #: the shared run flags (--out, --cache, --budget, ...)
    options: RunOptions = field(default_factory=run_options)

    def manifest_config(self) -> dict[str, Any]:
        """The settings as the manifest's ``config`` holds them: plain JSON, models as spec text."""
        return {k: v for k, v in spec_texts(self).items() if k != "notes"}

    def protocol_settings(self) -> dict[str, Any]:
        """The generation protocol with every default resolved (recorded in the manifest)."""
        proto = self.protocol or ("vera" if (self.rubric or "").startswith("vera:") else "carebench")
        vera = proto == "vera"
        return {"protocol": proto, "turns": self.turns if self.turns is not None else (30 if vera else 20),
                "turn_unit": self.turn_unit or ("messages" if vera else "exchanges"),
                "provider_speaks_first": self.provider_speaks_first,
                "persona_reminder": self.persona_reminder if self.persona_reminder is not None else vera,
                "sessions": list(self.sessions), "max_total_words": self.max_total_words,
                "default_system_prompt": self.default_system_prompt or ("assistant" if vera else "none")}

    def generation_config(self) -> GenerationConfig:
        """How the conversations are played (turns, system prompt, sampling settings): the one
        definition ``converse run`` and the Inspect task ``carebench/converse`` both use."""
        proto = self.protocol_settings()
        system_prompt = ((read_text(self.system_prompt_file).strip() or None) if self.system_prompt_file
                         else ASSISTANT_PROMPT if proto["default_system_prompt"] == "assistant" else None)
        return GenerationConfig(turns=proto["turns"], repeats=self.repeats, temperature=self.temperature,
                                simulator_temperature=self.temperature, max_tokens=self.max_tokens,
                                simulator_max_tokens=self.simulator_max_tokens, seed=self.seed,
                                system_prompt=system_prompt, turn_unit=proto["turn_unit"],
                                provider_speaks_first=proto["provider_speaks_first"],
                                persona_reminder=proto["persona_reminder"], sessions=tuple(proto["sessions"]),
                                max_total_words=proto["max_total_words"])

    def personas_and_prompts(self, inputs: Inputs) -> tuple[list[Any], dict[str, str]]:
        """The personas played (``--personas``, ``--personas-from``, ``--persona``) and each one's
        simulator prompt, filled before any call (shared with the Inspect task)."""
        if self.personas_from:
            inputs.personas_source = self.personas or BUILTIN
            personas = personas_from(self.personas_from, inputs.personas_source)
        else:
            personas = load_personas(inputs.personas_source)
        if self.persona_ids:
            personas = select_ids(personas, self.persona_ids, inputs.personas_source, "persona")
        if self.criteria == "task":
            bare = next((p for p in personas if not p.criteria), None)
            if bare is not None:
                raise CarebenchError(f"{bare.line}: field 'criteria': task {bare.id!r} has no criteria "
                                     "to judge its conversation against (--criteria task)")
        return list(personas), {p.id: persona_prompt(p, inputs.persona_template) for p in personas}

    @property
    def generates(self) -> bool:
        """Whether this run simulates its conversations (not ``converse judge``)."""
        return self.from_run is None and self.transcripts is None

    def validate(self) -> None:
        if self.criteria not in CRITERIA:
            raise CarebenchError(f"--criteria must be one of {', '.join(CRITERIA)}, got {self.criteria!r}")
        if self.criteria == "task":
            if self.personas_from != "support-tasks" or not self.generates:
                raise CarebenchError("--criteria task judges a conversation against its support task's own "
                                     "criteria: it needs --personas-from support-tasks on converse run")
            if self.rubric is not None:
                raise CarebenchError("--criteria task judges against the tasks' own criteria instead of a "
                                     "tree: leave out --rubric")
            if self.criteria_scope not in SCOPES:
                raise CarebenchError(f"--criteria-scope must be one of {', '.join(SCOPES)}, "
                                     f"got {self.criteria_scope!r}")
        if not self.judges:
            raise CarebenchError("give at least one --judge")
        from carebench.converse.simulator_questions import QUESTIONS

        bad = next((q for q in self.simulator_questions if q not in QUESTIONS), None)
        if bad is not None:
            raise CarebenchError(f"--simulator-questions: unknown question {bad!r} (give one or more of "
                                 f"{', '.join(QUESTIONS)}, comma-separated)")
        if self.simulator_judge is not None and not self.simulator_questions:
            raise CarebenchError("--simulator-judge goes with --simulator-questions")
        if self.simulator_questions and self.criteria == "task":
            raise CarebenchError("--simulator-questions go with the rubric's tree (--criteria tree)")
        if self.transcripts is not None and self.from_run is not None:
            raise CarebenchError("give either a run directory or --transcripts, not both")
        self.locale = run_locale(self.locale)
        from carebench.converse.engagement import check_mode

        check_mode(self.engagement)
        if self.drift is not None:  # a bad drift rubric stops the run before any call
            from carebench.converse.drift import load_drift_rubric

            load_drift_rubric(self.drift)
        if self.generates:
            if not self.simulators:
                raise CarebenchError("give at least one --simulator (the model that plays the user)")
            if not self.chatbots:
                raise CarebenchError("give at least one --chatbot (the model under test)")
        if self.judge_mode not in MODES:
            raise CarebenchError(f"--judge-mode must be one of {', '.join(MODES)}, got {self.judge_mode!r}")
        if self.turns is not None and self.turns < 1:
            raise CarebenchError(f"--turns must be at least 1, got {self.turns}")
        if self.protocol not in (None, "carebench", "vera"):
            raise CarebenchError(f"--protocol must be carebench or vera, got {self.protocol!r}")
        if self.turn_unit not in (None, *TURN_UNITS):
            raise CarebenchError(f"--turn-unit must be one of {', '.join(TURN_UNITS)}, got {self.turn_unit!r}")
        if self.default_system_prompt not in (None, "none", "assistant"):
            raise CarebenchError("--default-system-prompt must be none or assistant, "
                                 f"got {self.default_system_prompt!r}")
        if self.max_total_words is not None and self.max_total_words < 1:
            raise CarebenchError(f"--max-total-words must be at least 1, got {self.max_total_words}")
        bad = next((x for x in self.sessions if not x or not x.replace("-", "").isalnum()), None)
        if bad is not None or len(set(self.sessions)) != len(self.sessions):
            raise CarebenchError(f"--sessions takes distinct names of letters, digits and '-', got "
                                 f"{','.join(self.sessions)!r}")
        if self.repeats < 1:
            raise CarebenchError(f"--repeats must be at least 1, got {self.repeats}")
        for name, models in (("--chatbot", self.chatbots), ("--simulator", self.simulators)):
            specs = [str(m) for m in models]  # a ModelSpec does not sort; its text does
            dup = sorted({s for s in specs if specs.count(s) > 1})
            if dup:
                raise CarebenchError(f"{name} listed twice: {dup[0]}")


class ConverseSuite:
    """Generation, judging, scoring and the report (see the module docstring)."""

    name = SUITE


    def outline(self, run_dir: Path) -> None:
        """``comparison.json``, so leaderboards read this run in full only when they keep a system of it."""
        write_outline(run_dir, ConverseComparer())

    def __init__(self, cfg: ConverseConfig | None = None, recheck: Any = None):
        self.cfg = cfg
        #: ``converse score --resources``: (registry, locale) the recorded conversations are checked anew against
        self.recheck = recheck

    # -- set-up -------------------------------------------------------------------------
    def _prepare(self, run: Run):
        cfg = self.cfg
        assert cfg is not None, "a ConverseSuite without a config can only score and render"
        cfg.validate()
        if cfg.criteria == "task":
            inputs = Inputs.without_rubric(cfg.personas, cfg.persona_template)
        else:
            bundle = None
            if cfg.vera_config:  # the target as the config names it (a resolved config has no manifest)
                from carebench.converse.vera_config import read_vera_config

                bundle = read_vera_config(cfg.vera_config["path"], cfg.vera_config.get("checkout")).bundle
            inputs = Inputs.load(cfg.rubric, cfg.personas, cfg.persona_template, cfg.judge_system,
                                 cfg.judge_question, cfg.rubric_rules, cfg.judge_prompts, bundle)
            if inputs.prompts.style == "vera" and cfg.judge_mode == "dimension":
                raise CarebenchError("the VERA-MH target's judge prompts ask one question at a time: use "
                                     "--judge-mode question, or --judge-prompts carebench")
        judge_models = [run.model(s) for s in cfg.judges]
        judges = panel_seats([str(m.spec) for m in judge_models], judge_models)
        gcfg = cfg.generation_config()
        if cfg.from_run is not None:
            return inputs, judges, gcfg, [], _earlier_conversations(Path(cfg.from_run))
        if cfg.transcripts is not None:
            from carebench.datasets.transcripts import load_transcripts

            known = load_personas(inputs.personas_source) if inputs.personas_source != BUILTIN else None
            # --personas, or a vera: bundle's: their risk levels are joined
            convs = load_transcripts(cfg.transcripts, cfg.transcripts_chatbot, known)
            if inputs.annotation_columns:
                convs = annotate_conversations(convs, known or [], inputs.annotation_columns)
            return inputs, judges, gcfg, [], convs
        personas, prompts = cfg.personas_and_prompts(inputs)
        sims = [run.model(s) for s in cfg.simulators]
        bots = [run.model(s) for s in cfg.chatbots]
        labels = [f"s{i}-{name}" for i, name in enumerate(gcfg.sessions, 1)] or [None]
        convs = [Conversation(p, prompts[p.id], s, b, r, session=lab, attempt=r * len(labels) + i)
                 for s in sims for b in bots for p in personas for r in range(cfg.repeats)
                 for i, lab in enumerate(labels)]
        return inputs, judges, gcfg, personas, convs

    def plan(self, run: Run) -> Plan:
        cfg = self.cfg
        inputs, judges, gcfg, self._personas, convs = self._prepare(run)
        stages = []
        if cfg.generates:
            stages.append(stage(run, "generation", planned_generation(convs, gcfg), exact=False))
            stages[-1].upper_bound = True
            fake = [{"id": c.id, "turns": ([{"role": "user",
                                             "content": f"{c.id} " + "x" * (4 * gcfg.simulator_max_tokens)},
                                            {"role": "assistant", "content": "x" * (4 * gcfg.max_tokens)}]
                                           * gcfg.max_messages)[:gcfg.max_messages]} for c in convs]
        else:
            fake = [c for c in convs if c["status"] == "ok"]
        if cfg.criteria == "task":
            crit = {p.id: p.criteria for p in self._personas}
            fake = [{**f, "persona": c.persona.id} for f, c in zip(fake, convs, strict=True)]
            js = stage(run, CRITERIA_STAGE, planned_criteria_calls(
                fake, crit, judges, scope=cfg.criteria_scope, temperature=cfg.judge_temperature,
                max_tokens=cfg.judge_max_tokens), exact=False)
            js.upper_bound = True
            stages.append(js)
            self._plan_drift(run, stages, fake, judges)
            self._plan_engagement(run, stages, fake, judges)
            return Plan(self.name, stages, [("generation assumes every conversation runs all its turns with "
                                            "replies at their output caps: an upper bound; criteria judging "
                                            "asks every judge every criterion of each conversation's task")])
        js = stage(run, "judging", planned_judging(inputs.rubric, fake, judges, prompts=inputs.prompts,
                                                   temperature=cfg.judge_temperature,
                                                   max_tokens=cfg.judge_max_tokens, mode=cfg.judge_mode,
                                                   reasons=cfg.judge_reasons),
                   exact=not cfg.generates)
        js.upper_bound = True
        stages.append(js)
        if cfg.simulator_questions:
            from carebench.converse.simulator_questions import STAGE, planned_calls

            asked = fake
            if cfg.generates:  # the persona's risk level decides whether risk-consistency is asked
                asked = [{**f, "risk_level": c.persona.risk_level, "persona_name": c.persona.name}
                         for f, c in zip(fake, convs, strict=True)]
            ss = stage(run, STAGE, planned_calls(asked, cfg.simulator_questions, self._simulator_judge(run)),
                       exact=not cfg.generates)
            ss.upper_bound = cfg.generates
            stages.append(ss)
        self._plan_drift(run, stages, fake, judges)
        self._plan_engagement(run, stages, fake, judges)
        return Plan(self.name, stages, [("generation assumes every conversation runs all its turns with "
                                        "replies at their output caps, and judging assumes every question "
                                        "of the rubric is asked: both are upper bounds")])

    def _plan_drift(self, run: Run, stages: list[Any], fake: Sequence[Any], judges: Any) -> None:
        """``--drift``: one question per chatbot turn and judge (an upper bound when generating)."""
        if not self.cfg.drift:
            return
        from carebench.converse.drift import STAGE, load_drift_rubric, planned_calls

        ds = stage(run, STAGE, planned_calls(load_drift_rubric(self.cfg.drift), fake, judges),
                   exact=not self.cfg.generates)
        ds.upper_bound = self.cfg.generates
        stages.append(ds)

    def _plan_engagement(self, run: Run, stages: list[Any], fake: Sequence[Any], judges: Any) -> None:
        """``--engagement judge``: one question per chatbot turn the pre-filter leaves open and judge
        (an upper bound when generating); ``prefilter`` asks nothing."""
        if self.cfg.engagement != "judge":
            return
        from carebench.converse.engagement import STAGE, conversation_replies
        from carebench.engagement import engagement_question, prefilter_engagement
        from carebench.judging import judge_calls

        open_ = [r for c in fake for r in conversation_replies(c) if prefilter_engagement(r.text, r.status) is None]
        es = stage(run, STAGE, judge_calls([engagement_question(r.key, r.turns) for r in open_], judges,
                                           temperature=self.cfg.judge_temperature,
                                           max_tokens=self.cfg.judge_max_tokens), exact=not self.cfg.generates)
        es.upper_bound = self.cfg.generates
        stages.append(es)

    def _classify(self, run: Run, gen: Any, conv_records: list[dict[str, Any]],
                  judges: Any) -> list[dict[str, Any]]:
        """Every chatbot turn of every finished conversation classed (``--engagement``), recorded on
        the conversation records; a budget stop leaves the unasked conversations without classes."""
        from carebench.converse.engagement import STAGE, classify_conversations, with_engagement

        cfg = self.cfg
        if cfg.engagement == "judge" and _must_wait(run, gen):
            run.mark_incomplete(STAGE)
            return conv_records
        classes, skipped = classify_conversations([c for c in conv_records if c["status"] == "ok"], judges, run,
                                                  mode=cfg.engagement, temperature=cfg.judge_temperature,
                                                  max_tokens=cfg.judge_max_tokens)
        if skipped:
            run.mark_incomplete(STAGE, skipped)
        return with_engagement(conv_records, classes)

    def _ask_drift(self, run: Run, gen: Any, conv_records: list[dict[str, Any]],
                   judges: Any) -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
        """``--drift``: every chatbot turn of every finished conversation rated (records, calls
        that failed after every retry, the rubric as the manifest's ``scoring.drift``)."""
        if not self.cfg.drift:
            return [], 0, {}
        from carebench.converse.drift import STAGE, ask_drift, load_drift_rubric

        rubric = load_drift_rubric(self.cfg.drift)
        if _must_wait(run, gen):
            run.mark_incomplete(STAGE)
            return [], 0, {"drift": rubric.to_dict()}
        res = ask_drift(run, rubric, [c for c in conv_records if c["status"] == "ok"], judges)
        if res.stopped:
            run.mark_incomplete(STAGE)
        return res.records, res.failed_calls, {"drift": rubric.to_dict()}

    def _simulator_judge(self, run: Run) -> Any:
        """The judge seat answering the questions on the simulated user."""
        cfg = self.cfg
        model = run.model(cfg.simulator_judge or cfg.judges[0])
        return panel_seats([str(model.spec)], [model])[0]

    # -- execution ------------------------------------------------------------------------
    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        inputs, judges, gcfg, personas, convs = self._prepare(run)
        if cfg.generates:
            gen = generate(run, convs, gcfg)
            conv_records = [c.to_record() for c in convs if not c.cut]
            if inputs.annotation_columns:
                conv_records = annotate_conversations(conv_records, personas, inputs.annotation_columns)
            if gen.stopped:
                run.mark_incomplete("generation", gen.calls_skipped)
        else:
            gen = None
            conv_records = list(convs)
        from carebench.converse.routing import with_checks
        from carebench.resources import load_registry

        registry = load_registry(cfg.resources)
        conv_records = with_checks(conv_records, personas, cfg.locale, registry)
        self.resources = {**registry.summary(), "locale": cfg.locale}
        walks: list[dict[str, Any]] = []
        if cfg.criteria == "task":
            return self._execute_criteria(run, cfg, inputs, judges, gcfg, personas, gen, conv_records)
        if gen is not None and gen.stopped:
            run.mark_incomplete("judging", open_ended=True)
        else:
            judged = judge_conversations(run, inputs.rubric, [c for c in conv_records if c["status"] == "ok"],
                                         judges, prompts=inputs.prompts, temperature=cfg.judge_temperature,
                                         max_tokens=cfg.judge_max_tokens, mode=cfg.judge_mode,
                                         reasons=cfg.judge_reasons)
            walks = judged.walks
            if judged.stopped:
                run.mark_incomplete("judging", open_ended=True)
        sim_records, sim_failed_calls = self._ask_simulator_questions(run, gen, conv_records)
        drift_records, drift_failed, drift_settings = self._ask_drift(run, gen, conv_records, judges)
        conv_records = self._classify(run, gen, conv_records, judges)
        harness = sum(c["status"] == HARNESS_FAILURE for c in conv_records)
        judge_fail = sum(w["status"] != "ok" for w in walks)
        judge_calls_failed = sum(w.get("failure") == "call" for w in walks)
        judge_context = sum(w.get("failure") == "context" for w in walks)
        config = cfg.manifest_config()
        config["system_prompt"] = gcfg.system_prompt
        config.update(cfg.protocol_settings(), max_messages=gcfg.max_messages)
        config["stop_marker"] = STOP_MARKER
        files = {"rubric.json": [inputs.rubric.to_dict()]}
        if personas:
            files["personas.jsonl"] = [p.to_row() for p in personas]
        return Execution(
            records=conv_records + walks + sim_records + drift_records, config=config, files=files,
            dataset={"rubric": cfg.rubric, "rubric_sha256": data_sha256([inputs.rubric.to_dict()]),
                     "personas": inputs.personas_source if cfg.generates else (cfg.from_run or cfg.personas),
                     **_transcripts_provenance(cfg, conv_records),
                     **({"vera_bundle": inputs.vera} if inputs.vera else {}),
                     "judge_prompts": inputs.judge_prompts,
                     "conversations": len(conv_records),
                     "personas_from": cfg.personas_from,
                     # the built-in personas' conversations; a user's own transcripts are not
                     "illustrative": inputs.personas_source == BUILTIN and not cfg.transcripts},
            seeds={"bootstrap": cfg.seed, "generation": cfg.seed},
            extra={"scoring": {"dimensions": inputs.rubric.dimensions, "seed": cfg.seed,
                               "bootstrap": cfg.bootstrap, "judges": [j.label for j in judges],
                               "engagement": cfg.engagement,
                               **({"annotation_columns": inputs.annotation_columns}
                                  if inputs.annotation_columns else {}), **drift_settings},
                   "rubric_rules": rules_record(inputs.rubric.rules),
                   "failures": {"harness": harness, "judge": judge_fail, "judge_calls": judge_calls_failed,
                                "judge_context": judge_context,
                                "truncated_reasons": sum(w.get("truncated_reasons", 0) for w in walks),
                                **({"simulator_question_calls": sim_failed_calls}
                                   if cfg.simulator_questions else {}),
                                **({"drift_calls": drift_failed} if cfg.drift else {})},
                   # how each judge's answers were constrained (JSON schema, grammar, or the parser only)
                   "output_modes": run.output_modes(),
                   "resources": self.resources,
                   "title": cfg.title, "notes": list(cfg.notes)},
            failed_calls=harness + judge_calls_failed + sim_failed_calls + drift_failed,
        )

    def _ask_simulator_questions(self, run: Run, gen: Any,
                                 conv_records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """``--simulator-questions``: the judge questions on the simulated user, once per
        finished conversation (records and the count of calls that failed after every retry)."""
        cfg = self.cfg
        if not cfg.simulator_questions:
            return [], 0
        from carebench.converse.simulator_questions import STAGE, ask_simulator_questions

        if _must_wait(run, gen):
            run.mark_incomplete(STAGE)
            return [], 0
        res = ask_simulator_questions(run, [c for c in conv_records if c["status"] == "ok"],
                                      cfg.simulator_questions, self._simulator_judge(run))
        if res.stopped:
            run.mark_incomplete(STAGE)
        return res.records, res.failed_calls

    def _execute_criteria(self, run: Run, cfg: ConverseConfig, inputs: Inputs, judges: Any, gcfg: Any,
                          personas: Sequence[Any], gen: Any, conv_records: list[dict[str, Any]]) -> Execution:
        """``--criteria task``: every finished conversation judged on its task's criteria."""
        crit_records: list[dict[str, Any]] = []
        if gen.stopped:
            run.mark_incomplete(CRITERIA_STAGE, open_ended=True)
        else:
            judged = judge_criteria(run, [c for c in conv_records if c["status"] == "ok"],
                                    {p.id: p.criteria for p in personas}, judges, scope=cfg.criteria_scope,
                                    temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens)
            crit_records = judged.records
            if judged.stopped:  # every question was sent in one batch: the refused ones are the rest
                run.mark_incomplete(CRITERIA_STAGE)
        drift_records, drift_failed, drift_settings = self._ask_drift(run, gen, conv_records, judges)
        conv_records = self._classify(run, gen, conv_records, judges)
        harness = sum(c["status"] == HARNESS_FAILURE for c in conv_records)
        call_failed = sum(r["status"] == JUDGE_CALL_FAILURE for r in crit_records)
        failed_votes = sum(v["status"] != "ok" for r in crit_records for v in r["votes"])
        config = cfg.manifest_config()
        config["system_prompt"] = gcfg.system_prompt
        config.update(cfg.protocol_settings(), max_messages=gcfg.max_messages)
        config["stop_marker"] = STOP_MARKER
        return Execution(
            records=conv_records + crit_records + drift_records, config=config,
            dataset={"criteria": "task", "personas": inputs.personas_source, "conversations": len(conv_records),
                     "personas_from": cfg.personas_from,
                     "tasks_sha256": data_sha256([{"id": p.id, "criteria": [c.model_dump() for c in p.criteria]}
                                                  for p in personas]),
                     "illustrative": inputs.personas_source == BUILTIN},
            files={"personas.jsonl": [p.to_row() for p in personas]},
            seeds={"bootstrap": cfg.seed, "generation": cfg.seed},
            extra={"scoring": {"criteria": "task", "scope": cfg.criteria_scope, "seed": cfg.seed,
                               "bootstrap": cfg.bootstrap, "judges": [j.label for j in judges],
                               "engagement": cfg.engagement, **drift_settings},
                   "failures": {"harness": harness, "judge": failed_votes, "judge_calls": call_failed,
                                **({"drift_calls": drift_failed} if cfg.drift else {})},
                   "output_modes": run.output_modes(),
                   "resources": self.resources,
                   "title": ("Converse: simulated conversations judged against each support task's own "
                             "criteria" if cfg.title == ConverseConfig.title else cfg.title),
                   "notes": list(cfg.notes)},
            failed_calls=harness + call_failed + drift_failed,
        )

    # -- scoring and rendering --------------------------------------------------------------
    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        records = read_jsonl(Path(run_dir) / "records.jsonl")
        if getattr(self, "recheck", None) is not None:
            from carebench.converse.routing import with_checks

            path = Path(run_dir) / "personas.jsonl"
            personas = load_personas(path) if path.is_file() else []
            records = with_checks(records, personas, self.recheck[1], self.recheck[0])
        return records

    def score(self, records: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        convs = [r for r in records if r.get("kind") == "conversation"]
        walks = [r for r in records if r.get("kind") == "walk"]
        if manifest.get("incomplete"):
            return incomplete_metrics(manifest, {"conversations": len(convs), "walks": len(walks)})
        settings = manifest.get("scoring") or {}
        from carebench.converse.routing import routing_block

        if settings.get("criteria") == "task":
            m = score_criteria(records, settings)
            block = routing_block(records, manifest)
            if block is not None:
                m["resources"] = block
            return _with_drift(_with_engagement(m, records, settings), records, settings)
        rated, dims = rated_walks(walks, settings)
        m = summarize(rated, dims, B=int(settings.get("bootstrap", B_DEFAULT)),
                      seed=int(settings.get("seed", SEED_DEFAULT)),
                      annotation_columns=list(settings.get("annotation_columns") or []))
        m["counts"] = {
            "conversations": len(convs),
            "harness_failures": sum(c["status"] == HARNESS_FAILURE for c in convs),
            "ended_by_simulator": sum(c.get("ended_by") == "simulator" for c in convs),
            "walks": len(walks), "rated_walks": len(rated),
            "judge_failures": sum(w["status"] != "ok" for w in walks),
        }
        m["judges"] = sorted({w["judge"] for w in rated})
        keep = settings.get("judges")
        m["answer_fallbacks"] = fallback_summary([w for w in walks if not keep or w["judge"] in keep])
        block = routing_block(records, manifest)
        if block is not None:
            m["resources"] = block
        m["simulators"] = simulator_summary(convs, [r for r in records if r.get("kind") == "simulator_questions"])
        if rated:
            from carebench.converse.critical import critical_summary

            m["critical"] = critical_summary(rated, dims, convs, B=int(settings.get("bootstrap", B_DEFAULT)),
                                             seed=int(settings.get("seed", SEED_DEFAULT)))
        return _with_drift(_with_engagement(m, records, settings), records, settings)

    def render(self, metrics: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
               manifest: Mapping[str, Any]) -> Report:
        from carebench.converse.report import build_report

        title = manifest.get("title") or "Converse"
        if metrics.get("status") == "incomplete":
            return incomplete_report(title, metrics)
        report = build_report(metrics, records, manifest)
        if metrics.get("resources"):
            from carebench.converse.routing import report_examples
            from carebench.resources.report import routing_section

            report.sections.append(routing_section(metrics["resources"], report_examples(records)))
        if metrics.get("drift"):
            from carebench.converse.drift_report import drift_section

            report.sections.append(drift_section(metrics["drift"]))
        return report

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.converse.report import converse_headline

        return converse_headline(metrics)


def run_converse(cfg: ConverseConfig, cache: Any = None) -> Path | Plan:
    """Run ``converse run`` / ``converse judge`` (or plan it: ``cfg.options.dry_run``) with the
    config's run options; a budget stop raises ``RunStopped`` after writing what finished."""
    out = cfg.options.out
    if cfg.from_run and out is not None and Path(cfg.from_run).resolve() == Path(out).resolve():
        raise CarebenchError(f"--out {out} is the run whose conversations are judged: the walks go to a new "
                             "run directory (give another --out)")
    return run_suite(ConverseSuite(cfg), cfg.options, cache=cache)


def _must_wait(run: Run, gen: Any) -> bool:
    """Whether a stage that reads only finished conversations (drift ratings, questions on the
    simulated user, engagement questions) must wait: generation did not finish, or the budget stopped the run. Calls
    of the walk waiting for batch results stop nothing: these questions go into the same
    round as the walk's first questions (docs/batch.md), not one more round after it."""
    return run.ledger.stopped is not None or (gen is not None and gen.stopped is not None)


def _with_drift(m: dict[str, Any], records: Sequence[Mapping[str, Any]],
                settings: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics with their ``drift`` block when the run rated drift (``--drift``)."""
    if settings.get("drift"):
        from carebench.converse.drift_scoring import drift_summary

        m["drift"] = drift_summary(records, settings)
    return m


def _with_engagement(m: dict[str, Any], records: Sequence[Mapping[str, Any]],
                     settings: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics with their ``engagement`` block when the run holds conversations (recorded
    classes read back, or each turn's deterministic class: no model call)."""
    from carebench.converse.engagement import engagement_summary

    block = engagement_summary(records, settings, B=int(settings.get("bootstrap", B_DEFAULT)),
                               seed=int(settings.get("seed", SEED_DEFAULT)))
    if block is not None:
        m["engagement"] = block
    return m


def score_criteria(records: Sequence[Mapping[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
    """``--criteria task`` metrics: the criteria records without a judge call failure, decided by
    the panel of the run's judges (or the subset ``converse score --judge`` keeps)."""
    convs = [r for r in records if r.get("kind") == "conversation"]
    crit = [r for r in records if r.get("kind") == "criteria"]
    scored, panel = scored_criteria(records, settings)
    m = summarize_criteria(scored, panel, B=int(settings.get("bootstrap", B_DEFAULT)),
                           seed=int(settings.get("seed", SEED_DEFAULT)))
    m["scope"] = settings.get("scope", "anywhere")
    m["counts"] = {
        "conversations": len(convs),
        "harness_failures": sum(c["status"] == HARNESS_FAILURE for c in convs),
        "ended_by_simulator": sum(c.get("ended_by") == "simulator" for c in convs),
        "judged_conversations": len(crit), "scored_conversations": len(scored),
        "judge_call_failures": len(crit) - len(scored),
        "votes": sum(len(r["votes"]) for r in scored),
        "failed_votes": sum(v["status"] != "ok" for r in scored for v in r["votes"] if v["judge"] in panel),
    }
    m["judges"] = panel
    return m


def _transcripts_provenance(cfg: ConverseConfig, convs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``converse judge --transcripts``: where the conversations came from and a hash of them."""
    if cfg.transcripts is None:
        return {}
    return {"transcripts": cfg.transcripts,
            "transcripts_sha256": data_sha256([{"id": c["id"], "turns": [(t["role"], t["content"]) for t in c["turns"]]}
                                               for c in convs])}


def _earlier_conversations(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    if not path.is_file():
        raise CarebenchError(f"{run_dir}: not a run directory (no records.jsonl)")
    convs = [r for r in read_jsonl(path) if r.get("kind") == "conversation"]
    if not convs:
        raise CarebenchError(f"{run_dir}: no conversations to judge")
    return convs


class ImportSuite(ConverseSuite):
    """``converse import-vera``: VERA-MH results files as walk records (no calls)."""

    def __init__(self, paths: Sequence[str], chatbot: str = "imported", seed: int = SEED_DEFAULT,
                 bootstrap: int = B_DEFAULT, personas: str | None = None,
                 dimensions: Sequence[str] | None = None, rubric: str | None = None):
        super().__init__(None)
        self.paths, self.chatbot, self.seed, self.bootstrap = list(paths), chatbot, seed, bootstrap
        self.personas, self.dimensions, self.rubric = personas, list(dimensions or []), rubric

    def plan(self, run: Run) -> Plan:
        return Plan(self.name, [])

    def execute(self, run: Run) -> Execution:
        from carebench.converse.vera_import import read_personas_risk, read_results

        bundle = None
        if self.rubric and self.rubric.startswith("vera:"):  # a VERA-MH target: its rubric and its columns
            from carebench.converse.vera_bundle import load_vera_bundle

            bundle = load_vera_bundle(self.rubric)
        rubric = bundle.rubric if bundle else (load_rubric(self.rubric) if self.rubric else None)
        dims = self.dimensions or (rubric.dimensions if rubric else None)
        levels = read_personas_risk(self.personas) if self.personas else None
        walks, dims = read_results(self.paths, self.chatbot, dimensions=dims, personas=levels)
        # the columns scores are broken down by: the target's, else every annotation column of the results
        columns = list(bundle.annotation_columns) if bundle else []
        if not bundle:
            for w in walks:
                columns.extend(c for c in w.get("annotations") or {} if c not in columns)
        return Execution(
            records=walks, config={"results": self.paths, "chatbot": self.chatbot, "personas": self.personas,
                                   "dimensions": self.dimensions or None, "rubric": self.rubric},
            dataset={"results": self.paths, "sha256": [file_sha256(Path(p)) for p in self.paths],
                     "rows": len(walks),
                     "personas_sha256": file_sha256(Path(self.personas)) if self.personas else None,
                     **({"vera_bundle": bundle.provenance()} if bundle else {})},
            seeds={"bootstrap": self.seed},
            models=sorted({w["judge"] for w in walks}),
            extra={"kind": "import", "scoring": {"dimensions": dims, "seed": self.seed,
                                                 "bootstrap": self.bootstrap, "judges": None,
                                                 **({"annotation_columns": columns} if columns else {})},
                   "failures": {"harness": 0, "judge": 0},
                   "title": "Converse: VERA-MH results, scored with persona-resampling intervals",
                   "notes": [("Ratings read from VERA-MH results files; the conversations are not "
                             "part of this run.")]},
        )

