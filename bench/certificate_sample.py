"""The bundled sample's agreement certificate and leaderboard (the README's "Can I trust the golden
set?" and docs/explanation/golden-set-trust.md), reproduced.

    python bench/certificate_sample.py [--keep DIR] [--style-examples FILE]

Copies the project with the whole bundled sample (48 documents, 1,140 chunks, 250 hand-written
questions, 34 of them unanswerable; 120 generated beside them) into a temporary folder (--keep: into DIR, left in place), starts the stub LLM server of
tests/stub_llm.py on 127.0.0.1 set up as a careless generator (each reply copies 10 words from the
middle of its passage: "What does the documentation say about <10 words>?", those words as the
evidence), sets generate.provider: anthropic with ANTHROPIC_BASE_URL at the stub (no key leaves the
machine, nothing is paid: the cost line is the price table's estimate), runs the real `dvc repro`
with a 4-system panel (default (dense), bm25, hybrid, ann-ef16: CERTIFIED_PANEL), and prints the certificate (the verdict and its line;
per metric the separable, reproduced and contradicted pairs, Kendall tau and tau_AP with their 95%
bootstrap CIs, the pair agreement), the style gap and the
leaderboard: metrics/leaderboard.md of that run, the leaderboard stage's summary and verdict
lines, then a short summary. With --style-examples FILE (real questions: JSONL with a question field, or any question
set) the generator's prompts carry them as few-shot style examples (generate.style_examples); run it
with and without to see the style gap before/after. The stub ignores its prompt (its template
questions are the same with examples or without), so with the stub the gap cannot move: the run
says how many prompts carried the examples, and the measured change needs a real provider.
`dvc repro` took 154 s and 379 s on 2 CPU cores shared with other jobs (load
average about 4 and 8), most of it embedding the corpus.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import ROOT, copy_project, project_env, run_main

from retrieval_bench.core.params_panel import embedded_pairs

sys.path.insert(0, str(ROOT / "tests"))
from stub_llm import StubLLM, stage_env  # noqa: E402  (tests/ holds the stub server)


def template_reply(passage: str) -> str:
    """A careless generator's reply: 10 words from the middle of the passage, as question and evidence."""
    words = passage.split()
    middle = " ".join(words[len(words) // 3 : len(words) // 3 + 10])
    return json.dumps({"question": f"What does the documentation say about {middle}?", "evidence": middle})


CERTIFIED_PANEL = {
    "default": {"method": "dense"},  # the panel's default system
    "bm25": {"method": "bm25"},
    "hybrid": {"method": "hybrid"},
    "ann-ef16": {"method": "ann", "ann": {"ef_search": 16, "hnsw_m": 4}},
}


GENERATED = 120  # the generated questions the docs' figures were measured with


def handwritten_rows(path: Path) -> int:
    """The questions in the hand-written file (one JSON object per non-blank line)."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def prepare(project: Path, env: dict[str, str], style_examples: Path | None) -> None:
    """The project copy with the whole sample and generation on (the stub answers), with the style
    examples copied in when given."""
    copy_project(project, env)
    shutil.copytree(ROOT / "data" / "sample", project / "data" / "sample")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["generate"]["provider"] = "anthropic"
    # GENERATED questions beside every hand-written one (max_questions counts both)
    params["generate"]["max_questions"] = handwritten_rows(project / params["generate"]["handwritten"]) + GENERATED
    # The 4 retrieval systems the figures in the docs were measured on (the sample's panel also
    # crosses chunkings and embedders now): one chunking, one embedder.
    params["chunkings"], params["embedders"] = {"default": {}}, {"default": {}}
    params["panel"] = {
        name: {"chunking": "default", "embedder": "default", **system} for name, system in CERTIFIED_PANEL.items()
    }
    params["embedded"] = embedded_pairs(params["panel"])
    if style_examples is not None:
        copied = Path("data") / f"style_examples{style_examples.suffix}"
        shutil.copy2(style_examples, project / copied)
        params["generate"]["style_examples"] = copied.as_posix()
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def style_examples_line(project: Path, prompts: list[str]) -> str:
    """Which style examples generation used, and how many prompts the stub saw them in."""
    used = json.loads((project / "metrics" / "goldenset.json").read_text()).get("style_examples") or {}
    if used.get("file") is None:
        return "style examples: none (generate.style_examples null)"
    carried = sum("<example>" in prompt for prompt in prompts)
    return (
        f"style examples: {used['n_examples']} from {used['file']} in {carried} of {len(prompts)} generation prompts; "
        "the stub ignores its prompt (the same template questions either way), so this style gap cannot move here"
    )


def summary(project: Path, prompts: list[str]) -> list[str]:
    """The figures the README quotes: the verdict line, mrr's and ndcg@10's statistics, the
    hypotheses beyond the margin, the style gap, the style examples."""
    cert = json.loads((project / "metrics" / "certificate.json").read_text())
    if not cert["available"]:
        return [f"certificate not available: {cert['reason']}", style_examples_line(project, prompts)]

    def estimate(m: dict, key: str) -> str:
        return f"{m[key]['value']:.2f} [{m[key]['ci_low']:.2f}, {m[key]['ci_high']:.2f}]"

    lines = [f"systems: {', '.join(cert['systems'])}; questions: {cert['n_questions']}"]
    for set_name, entry in cert["sets"].items():
        lines.append(f"{set_name}: {entry['verdict']}: {entry['line']}")
        for name in ("mrr", "ndcg@10"):
            m = entry["metrics"][name]
            beyond = [
                f"{h['pair'][1]} vs {h['pair'][0]}" if h["pair"] else "level" for h in m["hypotheses"] if h["beyond"]
            ]
            pairs = [h for h in m["hypotheses"] if h["kind"] == "pair"]
            lines.append(
                f"{name}: best {m['winner']['reference_best']} / {m['winner']['synthetic_best']}; decision pairs "
                f"equivalent {sum(h['equivalent'] for h in pairs)} of {len(pairs)}; beyond the margin: "
                f"{', '.join(beyond) or 'none'}; tau {estimate(m, 'kendall_tau')}, "
                f"tau_AP {estimate(m, 'tau_ap')}, pair agreement {m['pair_agreement']['value']:.2f}"
            )
        gap = entry["style_gap"]
        lines.append(
            f"style gap: classifier AUC {gap['classifier_auc']:.2f}; echo share {gap['reference']['echo_content_share']:.2f} "
            f"({cert['reference']}) vs {gap['synthetic']['echo_content_share']:.2f} ({set_name})"
        )
    return [*lines, style_examples_line(project, prompts)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build the project copy here and leave it")
    parser.add_argument("--style-examples", type=Path, help="real questions as generation's few-shot style examples")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="certificate-sample-"))
    project = folder / "project"
    try:
        with StubLLM() as stub:
            stub.reply = template_reply
            env = project_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DVC_NO_ANALYTICS="1")
            env.update({k: v for k, v in stage_env(stub).items() if k.startswith("ANTHROPIC_")})
            prepare(project, env, args.style_examples and args.style_examples.resolve())
            started = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "dvc", "repro"], cwd=project, env=env, capture_output=True, text=True
            )
            seconds = time.monotonic() - started
            prompts = [request.body["messages"][-1]["content"] for request in stub.generation_requests()]
        if result.returncode:
            sys.exit(
                f"certificate_sample: dvc repro exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        print((project / "metrics" / "leaderboard.md").read_text())
        print(
            "\n".join(
                line
                for line in (result.stdout + result.stderr).splitlines()
                if line.startswith(("leaderboard:", "certificate:"))
            )
        )
        print(f"dvc repro: {seconds:.0f} s")
        print("\n".join(summary(project, prompts)))
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    run_main(main)
