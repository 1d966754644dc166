// The page's logic: ask /v1/translate for a translation (of text or HTML) with its n-best list and
// attention, and draw the encoder-decoder attention of the chosen layer and head as a heat map;
// send a file to /translate_file and offer its translation for download; in the Explain tab, ask
// /v1/explain for one sentence's whole computation and draw it (explain.js, as `aiayn explain` does).
"use strict";

const $ = (id) => document.getElementById(id);
let current = null; // the last translation, with its attention

async function loadModels() {
  const response = await fetch("/v1/models");
  const info = await response.json();
  for (const m of info.models) {
    for (const select of [$("pair"), $("explain-pair")]) {
      select.add(new Option(`${m.source} → ${m.target}`, `${m.source}:${m.target}`));
    }
  }
  $("beam").max = info.max_beam_size;
  $("explain-beam").max = info.max_beam_size;
  $("nbest").max = info.max_beam_size;
  if (info.models.length) $("beam").value = info.models[0].beam_size;
  $("key-label").hidden = !info.api_key_required;
}

// POST to `url`, then `done(answer)` with its JSON answer; meanwhile `button` is disabled and `status`
// says `busy`, then what `done` returns, or the server's error.
async function post(url, init, button, status, busy, done) {
  status.textContent = busy;
  status.className = "";
  button.disabled = true;
  try {
    const response = await fetch(url, { method: "POST", ...init });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || response.statusText);
    status.textContent = done(answer) || "";
  } catch (error) {
    status.textContent = error.message;
    status.className = "error";
  } finally {
    button.disabled = false;
  }
}

function jsonHeaders() {
  const headers = { "Content-Type": "application/json" };
  if ($("key").value) headers["X-API-Key"] = $("key").value;
  return headers;
}

async function translate(event) {
  event.preventDefault();
  const [source, target] = $("pair").value.split(":");
  const beam = Number($("beam").value);
  const nbest = Math.min(Number($("nbest").value), beam);
  const body = JSON.stringify({ text: $("text").value, source, target, beam_size: beam, nbest,
                                attention: true, format: $("format").value });
  await post("/v1/translate", { headers: jsonHeaders(), body }, $("translate"), $("status"), "translating…",
    (answer) => {
      show(answer.translations[0], target);
      // HTML: the markup as text above, and drawn below in a sandbox (no scripts, no requests out).
      $("preview").hidden = $("format").value !== "html";
      $("preview").srcdoc = $("format").value === "html" ? answer.translations[0].text : "";
    });
}

async function translateFile(event) {
  event.preventDefault();
  const file = $("file").files[0];
  if (!file) { $("file-status").textContent = "choose a file first"; return; }
  const [source, target] = $("pair").value.split(":");
  const form = new FormData();
  form.append("file", file);
  form.append("source", source);
  form.append("target", target);
  if ($("key").value) form.append("api_key", $("key").value);
  $("download").hidden = true;
  await post("/translate_file", { body: form }, $("translate-file"), $("file-status"), "translating…",
    (answer) => {
      $("download").href = answer.translatedFileUrl;
      $("download").hidden = false;
      return `${file.name}: done`;
    });
}

function scoreSpan(score) {
  const span = document.createElement("span");
  span.className = "score";
  span.textContent = score.toFixed(3);
  return span;
}

function show(t, target) {
  // A text of several sentences: each has its own attention; the heat map shows the first one's.
  current = { ...t, attention: t.attention || (t.sentences ? t.sentences[0].attention : null) };
  $("result").hidden = false;
  $("translation").textContent = t.text;
  $("translation").lang = target;
  $("translation").appendChild(scoreSpan(t.score));
  $("alternatives").replaceChildren(...t.alternatives.map((a) => {
    const li = document.createElement("li");
    li.textContent = a.text;
    li.appendChild(scoreSpan(a.score));
    return li;
  }));
  const attention = current.attention;
  $("layer").replaceChildren();
  $("head").replaceChildren();
  if (!attention) { $("heatmap").replaceChildren(); return; }
  attention.cross.forEach((_, i) => $("layer").add(new Option(`${i + 1}`, i)));
  attention.cross[0].forEach((_, i) => $("head").add(new Option(`${i + 1}`, i)));
  $("layer").value = attention.cross.length - 1;
  draw();
}

function piece(p) { return p.replace(/^▁/, "␣"); }

function draw() {
  const a = current && current.attention;
  if (!a) return;
  const weights = a.cross[Number($("layer").value)][Number($("head").value)];
  const table = document.createElement("table");
  table.className = "heat";
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("th"));
  for (const s of a.source) {
    const th = document.createElement("th");
    th.textContent = piece(s);
    head.appendChild(th);
  }
  const body = table.createTBody();
  weights.forEach((row, t) => {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.textContent = piece(a.target[t]);
    tr.appendChild(th);
    row.forEach((w, s) => {
      const td = tr.insertCell();
      td.style.background = `rgba(20, 80, 200, ${w})`;
      td.title = `${piece(a.target[t])} → ${piece(a.source[s])}: ${w.toFixed(3)}`;
    });
    tr.addEventListener("mouseenter", () => focus(table, tr, t, row));
  });
  $("heatmap").replaceChildren(table);
}

function focus(table, tr, t, row) {
  const a = current.attention;
  table.querySelectorAll(".focus").forEach((e) => e.classList.remove("focus"));
  tr.classList.add("focus");
  const strongest = row.map((w, s) => [w, s]).sort((x, y) => y[0] - x[0])
    .filter(([w], i) => i === 0 || (i < 3 && w >= 0.05)); // the strongest, and others that count
  strongest.forEach(([, s]) => table.tHead.rows[0].cells[s + 1].classList.add("focus"));
  $("focus").textContent = `"${piece(a.target[t])}" attends most to ` +
    strongest.map(([w, s]) => `"${piece(a.source[s])}" (${w.toFixed(2)})`).join(", ");
}

async function explainSentence(event) {
  event.preventDefault();
  const [source, target] = $("explain-pair").value.split(":");
  const body = JSON.stringify({ text: $("explain-text").value, source, target,
                                beam_size: Number($("explain-beam").value) });
  await post("/v1/explain", { headers: jsonHeaders(), body }, $("explain-button"), $("explain-status"),
    "computing…", (answer) => {
      AiaynExplain.render($("explain"), answer, document.documentElement.lang.startsWith("zh") ? "zh" : "en");
    });
}

function showTab(id) {
  document.querySelectorAll("nav.tabs .tab").forEach((b) => b.classList.toggle("active", b.dataset.tab === id));
  $("translate-tab").hidden = id !== "translate-tab";
  $("explain-tab").hidden = id !== "explain-tab";
}

document.querySelectorAll("nav.tabs .tab").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
$("explain-form").addEventListener("submit", explainSentence);
$("form").addEventListener("submit", translate);
$("file-form").addEventListener("submit", translateFile);
$("layer").addEventListener("change", draw);
$("head").addEventListener("change", draw);
loadModels().catch((error) => {
  $("status").textContent = `cannot list the models: ${error.message}`;
  $("status").className = "error";
});
