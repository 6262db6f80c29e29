"""VERA-MH's own files as one input: ``--rubric vera:PATH``.

carebench does not ship VERA-MH's rubric, personas or persona prompts; a user points at a
copy of them. ``PATH`` is a VERA-MH checkout (its ``data/SI`` target is used), its
``data`` folder, or one target folder (``data/SI``, ``data/HFO``) holding a VERA-MH
``manifest.json`` (``rubric_file``, ``personas``, ``persona_context_template_file``).
Files a manifest names are looked up in the target folder, then in its parent
(``data/``), which is where VERA-MH v1.2 keeps the SI personas and templates.

The persona prompt is VERA-MH's own: its prompt template (``persona_prompt_template.txt``)
with the target's context template in its ``{persona_context}`` slot, each
``{Column Name}`` filled from the persona's column of that name. A prompt template
without that slot (older copies, which carry the SI columns inline) is replaced by
carebench's short role-play frame (``persona_frame.txt``) around the context template. A
column a template names that the persona file lacks is an error naming the persona's
line, raised before any call, as VERA-MH itself refuses it. Only the first persona file
a manifest lists is read, as VERA-MH does.

A VERA-MH 2.0 target also names its judge's two prompt files: ``rubric_prompt_beginning_file``
(the judge's system prompt, the conversation in its ``{conversation}`` field) and
``question_prompt_file`` (each question, with ``{question}``, ``{examples_section}`` and
``{options}``). When the target folder has both, they are the judge's prompts, filled as
VERA-MH's judge fills them (``converse.judging.question_messages``), unless
``--judge-prompts carebench`` asks for carebench's own. A target whose manifest names them
but whose folder lacks them (a copy that left them out) is judged with carebench's prompts,
and the manifest of the run says so.

A target's ``persona_annotation_columns`` (HFO: ``Active Life Threat``) name persona
columns that VERA-MH copies beside each conversation's ratings; carebench carries each
conversation's persona values along in the same way and breaks the scores down by them
(``by_annotation`` in the metrics, ``scores_by_annotation.json``, the report).

The manifest of the run records the SHA-256 of every file read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.converse.judging import VERA_QUESTION_FIELDS, VERA_SYSTEM_FIELDS, vera_format
from carebench.converse.personas import PROMPTS, snake
from carebench.converse.rubric import Rubric, load_rubric
from carebench.datasets.files import read_text
from carebench.engine.rundir import file_sha256
from carebench.templates import fill_some, package_template
from carebench.types import CarebenchError

PREFIX = "vera:"
#: VERA-MH's persona prompt template (not named in a target's manifest; shared by targets)
PROMPT_TEMPLATE = "persona_prompt_template.txt"
_SLOT = re.compile(r"\{([^{}\n]+)\}")


@dataclass
class VeraBundle:
    root: Path  # the target folder
    target: str
    rubric: Rubric
    personas: Path | None
    #: the persona prompt in carebench's placeholder form (``{snake_case_column}``)
    persona_template: str | None
    #: every file read, relative to the target folder's parent -> SHA-256
    files: dict[str, str] = field(default_factory=dict)
    #: the target's judge prompts (``rubric_prompt_beginning_file``, ``question_prompt_file``),
    #: None when the manifest names none or the folder lacks one
    judge_system: str | None = None
    judge_question: str | None = None
    #: the two prompt files' names as the manifest gives them (recorded when missing, too)
    judge_files: dict[str, str | None] = field(default_factory=dict)
    #: ``persona_annotation_columns``: persona columns scores are broken down by (HFO's
    #: ``Active Life Threat``); none when the manifest names none
    annotation_columns: list[str] = field(default_factory=list)

    def provenance(self) -> dict[str, Any]:
        return {"path": str(self.root), "target": self.target, "sha256": dict(self.files)}

    @property
    def has_judge_prompts(self) -> bool:
        return self.judge_system is not None and self.judge_question is not None


def target_folder(path: Path) -> Path:
    """The target folder a ``vera:`` path names (see the module docstring)."""
    for cand in (path, path / "SI", path / "data" / "SI"):
        if (cand / "manifest.json").is_file():
            return cand
    raise CarebenchError(f"{path}: not a VERA-MH checkout, data folder or target folder "
                         "(no manifest.json in it, in SI/ or in data/SI/)")


def _find(root: Path, name: str) -> Path | None:
    for folder in (root, root.parent):
        if (folder / name).is_file():
            return folder / name
    return None


def to_placeholders(template: str) -> str:
    """VERA-MH's ``{Column Name}`` slots as carebench's ``{column_name}`` (persona fields
    are matched by their snake-case names)."""
    return _SLOT.sub(lambda m: "{" + snake(m.group(1)) + "}", template)


def load_vera_bundle(spec: str) -> VeraBundle:
    path = Path(spec.removeprefix(PREFIX))
    if not path.exists():
        raise CarebenchError(f"{path}: VERA-MH files not found (give a checkout, its data/ folder, or "
                             "data/SI or data/HFO)")
    root = target_folder(path)
    man_path = root / "manifest.json"
    try:
        man = json.loads(read_text(man_path))
    except ValueError as e:
        raise CarebenchError(f"{man_path}:1:1: invalid JSON ({e})") from None
    if not isinstance(man, dict) or not man.get("rubric_file"):
        raise CarebenchError(f"{man_path}:1:1: a VERA-MH target manifest names its 'rubric_file'")
    return bundle_from_manifest(root, man, man_path, read_manifest=True)


def bundle_from_manifest(root: Path, man: dict[str, Any], man_path: Path, *, read_manifest: bool = False,
                         target: str | None = None) -> VeraBundle:
    """A bundle from a manifest's fields, each file looked up in ``root`` then its parent (an
    absolute path is taken as it is): a target folder's ``manifest.json``, or the files a
    resolved VERA-MH run config names (:mod:`carebench.converse.vera_config`)."""
    files: dict[str, str] = {}

    def take(name: str | None, what: str, required: bool = False) -> Path | None:
        if not name:
            return None
        found = _find(root, str(name))
        if found is None:
            if required:
                raise CarebenchError(f"{man_path}: {what} {name!r} is neither in {root} nor in {root.parent}")
            return None
        try:
            key = str(found.relative_to(root.parent))
        except ValueError:
            key = str(found)
        files[key] = file_sha256(found)
        return found

    if read_manifest:
        take("manifest.json", "manifest")
    rubric_path = take(man["rubric_file"], "rubric", required=True)
    assert rubric_path is not None
    personas = man.get("personas") or []
    if isinstance(personas, str):
        personas = [personas]
    persona_path = take(personas[0] if personas else None, "persona file", required=True)
    context = take(man.get("persona_context_template_file"), "persona context template", required=True)
    prompt = take(PROMPT_TEMPLATE, "persona prompt template")
    template = None
    if context is not None:
        ctx = read_text(context).strip()
        outer = read_text(prompt) if prompt is not None else ""
        if "{persona_context}" in outer:
            template = fill_some(outer, {"persona_context": ctx}, "persona prompt template")
        else:
            template = fill_some(package_template(PROMPTS, "persona_frame"), {"persona_context": ctx}, "persona_frame")
            if prompt is not None:  # read, but not used: keep the record honest
                del files[str(prompt.relative_to(root.parent))]
        template = to_placeholders(template)
    names = {k: (str(man[k]) if man.get(k) else None) for k in ("rubric_prompt_beginning_file", "question_prompt_file")}
    found = {k: _find(root, v) if v else None for k, v in names.items()}
    system = question = None
    if all(found.values()):
        for k, name in names.items():
            take(name, k)
        sys_path, q_path = found["rubric_prompt_beginning_file"], found["question_prompt_file"]
        assert sys_path is not None and q_path is not None
        system, question = read_text(sys_path), read_text(q_path)
        # checked before any call: a field VERA-MH would not fill is an error now, not mid-run
        vera_format(system, dict.fromkeys(VERA_SYSTEM_FIELDS, ""), str(sys_path))
        vera_format(question, dict.fromkeys(VERA_QUESTION_FIELDS, ""), str(q_path))
    cols = man.get("persona_annotation_columns", [])
    if not isinstance(cols, list) or not all(isinstance(c, str) and c.strip() for c in cols):
        raise CarebenchError(f"{man_path}:1:1: 'persona_annotation_columns' must be a list of column names, "
                             f"got {cols!r}")
    return VeraBundle(root, target or root.name, load_rubric(rubric_path), persona_path, template, files,
                      system, question, names, [c.strip() for c in cols])
