"""The review page: one self-contained HTML document (inline CSS and script, nothing fetched but
this server's /state and /click), driven by the keyboard. Corpus texts are set as text nodes, never
as HTML."""

from __future__ import annotations

from retrieval_bench.goldenset.reviews import GRADES, MARK_LABELS

# The key that gives each question mark (goldenset.reviews.QUESTION_MARKS); grades are their digits.
MARK_KEYS = {"fine": "f", "ambiguous": "a", "not_answerable": "n", "gives_away": "g", "not_real": "r"}
GRADE_LABELS = {0: "unrelated", 1: "related, does not answer", 2: "answers in part", 3: "answers it"}


def keys_legend() -> list[tuple[str, str]]:
    """(key, what it does), as the page shows them (and the how-to lists them)."""
    marks = [(key, f"mark the question: {MARK_LABELS[mark]}") for mark, key in MARK_KEYS.items()]
    grades = [(str(grade), f"grade the selected chunk {grade}: {GRADE_LABELS[grade]}") for grade in GRADES]
    moves = [
        ("j / ↓", "select the next chunk"),
        ("k / ↑", "select the previous chunk"),
        ("→ / Enter", "next question"),
        ("←", "previous question"),
    ]
    return marks + grades + moves


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>retrieval-bench review</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:8px 16px;z-index:1}
#bar{height:8px;background:#e5e5e5;border-radius:4px;overflow:hidden;margin-top:6px}
#fill{height:100%;background:#2a7ae2;width:0}
main{display:grid;grid-template-columns:1fr 300px;gap:16px;padding:16px}
h1{font-size:18px;margin:0 0 8px}
.question{font-size:20px;font-weight:600;margin:4px 0 6px}
.meta{color:#666;font-size:13px}
.passage{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:8px 0;white-space:pre-wrap}
mark{background:#ffe066}
.card{background:#fff;border:2px solid #ddd;border-radius:6px;padding:8px 12px;margin:8px 0;white-space:pre-wrap}
.card.selected{border-color:#2a7ae2}
.grade{float:right;font-weight:700;border-radius:4px;padding:0 8px;margin-left:8px;background:#eee}
.g0{background:#eee}.g1{background:#fde2c4}.g2{background:#cde9c5}.g3{background:#8fd18a}
#mark{display:inline-block;font-weight:700;padding:2px 8px;border-radius:4px;background:#eee}
#mark.fine{background:#8fd18a}#mark.other{background:#f4a3a3}
aside{font-size:13px;position:sticky;top:190px;align-self:start}kbd{border:1px solid #bbb;border-radius:3px;padding:0 4px;background:#fff;font:12px monospace}
aside td{padding:2px 4px;vertical-align:top}
#status.failed{color:#b00;font-weight:700}
</style></head>
<body>
<header><h1>Review <span id="position"></span> <span class="meta" id="reviewer"></span></h1>
<div class="meta"><span id="progress"></span> · <span id="status">loading…</span></div>
<div id="bar"><div id="fill"></div></div>
<div class="meta" id="about"></div>
<div class="question" id="question"></div>
<div>Question: <span id="mark">not marked</span></div></header>
<main><section>
<h2 class="meta">Evidence</h2><div id="evidence"></div>
<h2 class="meta">Retrieved chunks (pooled from every system, shuffled): grade each 0-3</h2><div id="chunks"></div>
</section>
<aside><b>Keys</b><table id="keys"></table></aside></main>
<script>
"use strict";
let S = null, at = 0, selected = 0, saved = 0, written = 0, failed = 0, lastFailed = false;
const $ = (id) => document.getElementById(id);
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
function gradeOf(qid, card) { const g = (S.grades[qid] || {})[card.chunk_ids[0]]; return g === undefined ? null : g; }
function firstUnmarked() { const i = S.items.findIndex((it) => !(it.qid in S.marks)); return i < 0 ? S.items.length - 1 : i; }
// The next chunk without a grade after `from`, wrapping round to the first ones; -1 when every one has one.
function nextUngraded(item, from) {
  const n = item.chunks.length;
  for (let step = 1; step <= n; step++) { const i = (from + step) % n; if (gradeOf(item.qid, item.chunks[i]) === null) return i; }
  return -1;
}
let sending = Promise.resolve();
// One click at a time, in the order made: the file's order is the clicks' (the last click wins).
// A click the server did not save is undone on the page (`undo`), so what the page shows is the file.
function post(body, undo) {
  sending = sending.then(() => fetch("/click", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})
    .then((r) => r.json().then((j) => { if (!r.ok) throw new Error(j.error); saved += 1; written += j.saved; lastFailed = false; show(); }))
    .catch((e) => {
      failed += 1; lastFailed = true; undo(); render(false);
      $("status").textContent = `NOT SAVED (${e.message}): that click is undone on the page; make it again`;
      $("status").className = "failed"; document.body.dataset.failed = failed;
    }));
}
function render(scroll) {
  const item = S.items[at];
  $("position").textContent = `${at + 1} of ${S.items.length}`;
  $("about").textContent = `${item.qid} · ${item.question_set} · ${item.kind}`;
  $("question").textContent = item.question;
  const mark = S.marks[item.qid];
  $("mark").textContent = mark ? S.mark_labels[mark] : "not marked";
  $("mark").className = mark ? (mark === "fine" ? "fine" : "other") : "";
  const ev = $("evidence"); ev.replaceChildren();
  if (!item.evidence.length) ev.append(el("div", "meta", item.kind === "unanswerable" ? "none: the corpus should not answer this question" : "none"));
  for (const p of item.evidence) {
    const d = el("div", "passage"); d.append(el("div", "meta", p.doc_id), p.before, el("mark", "", p.span), p.after); ev.append(d);
  }
  const cs = $("chunks"); cs.replaceChildren();
  item.chunks.forEach((card, i) => {
    const g = gradeOf(item.qid, card);
    const d = el("div", "card" + (i === selected ? " selected" : ""));
    d.dataset.chunkIds = JSON.stringify(card.chunk_ids);
    d.append(el("span", "grade g" + (g === null ? "" : g), g === null ? "–" : String(g)), el("div", "meta", `chunk ${i + 1}`), card.text);
    cs.append(d);
  });
  if (!item.chunks.length) cs.append(el("div", "meta", "no system retrieved a chunk for this question"));
  const sel = cs.querySelector(".selected"); if (sel && scroll) sel.scrollIntoView({block: "center"});
  show();
}
function show() {
  const done = S.items.filter((it) => it.qid in S.marks).length;
  $("progress").textContent = `${done} of ${S.items.length} questions marked`;
  $("fill").style.width = (100 * done / S.items.length) + "%";
  if (!lastFailed) {
    const undone = failed ? `; ${failed} not saved, undone` : "";
    $("status").textContent = `${written} click${written === 1 ? "" : "s"} saved to ${S.file}${undone}`; $("status").className = "";
  }
  document.body.dataset.saved = saved; document.body.dataset.at = at;
}
// A question opens at the top (its evidence under the header), on its first chunk without a grade.
function go(i) {
  at = Math.max(0, Math.min(S.items.length - 1, i));
  selected = Math.max(0, nextUngraded(S.items[at], S.items[at].chunks.length - 1)); render(false); window.scrollTo(0, 0);
}
document.addEventListener("keydown", (e) => {
  if (!S || e.ctrlKey || e.metaKey || e.altKey) return;
  const item = S.items[at], key = e.key.length === 1 ? e.key.toLowerCase() : e.key;  // Shift or Caps Lock: the same key
  const mark = Object.keys(S.mark_keys).find((m) => S.mark_keys[m] === key);
  if ((mark || /^[0-3]$/.test(key)) && e.repeat) { e.preventDefault(); return; }  // a key held down clicks once
  if (mark) {
    const before = S.marks[item.qid];
    S.marks[item.qid] = mark;
    post({qid: item.qid, mark}, () => { if (S.marks[item.qid] === mark) { if (before === undefined) delete S.marks[item.qid]; else S.marks[item.qid] = before; } });
    render(false);
  }
  else if (/^[0-3]$/.test(key) && item.chunks.length) {
    const card = item.chunks[selected], grade = Number(key);
    const grades = S.grades[item.qid] = S.grades[item.qid] || {};
    const before = card.chunk_ids.map((c) => grades[c]);
    for (const c of card.chunk_ids) grades[c] = grade;
    post({qid: item.qid, chunk_ids: card.chunk_ids, grade}, () => card.chunk_ids.forEach((c, j) => {
      if (grades[c] === grade) { if (before[j] === undefined) delete grades[c]; else grades[c] = before[j]; }
    }));
    const next = nextUngraded(item, selected);
    if (next >= 0) selected = next; else if (selected < item.chunks.length - 1) selected += 1;
    render(true);
  }
  else if (key === "j" || key === "ArrowDown") { selected = Math.min(item.chunks.length - 1, selected + 1); render(true); }
  else if (key === "k" || key === "ArrowUp") { selected = Math.max(0, selected - 1); render(true); }
  else if (key === "ArrowRight" || key === "Enter") go(at + 1);
  else if (key === "ArrowLeft") go(at - 1);
  else return;
  e.preventDefault();
});
fetch("/state").then((r) => r.json()).then((state) => {
  if (state.error) { $("status").textContent = state.error; $("status").className = "failed"; return; }
  S = state;
  $("reviewer").textContent = `reviewer ${S.reviewer}`;
  for (const [k, what] of S.keys) { const tr = el("tr"); const td = el("td"); td.append(el("kbd", "", k)); tr.append(td, el("td", "", what)); $("keys").append(tr); }
  go(firstUnmarked());
  document.body.dataset.ready = "1";
});
</script></body></html>
"""
