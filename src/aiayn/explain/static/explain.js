// The explain page: one translation's computation, panel by panel, in the order of "The Illustrated
// Transformer". AiaynExplain.render(root, data, lang) draws it into `root` from the JSON that
// `aiayn explain` embeds in its page (or the server's /v1/explain answers); the words are in
// words.js. Nothing is fetched: the page works offline, from the file system.
"use strict";

(function () {
  const PANELS = ["input", "attention", "heads", "ffn", "decoder", "search"];

  // ---- data: tensors are float32 in base64, {shape, f32}
  function tensor(stored) {
    const bytes = Uint8Array.from(atob(stored.f32), (c) => c.charCodeAt(0));
    return { shape: stored.shape, data: new Float32Array(bytes.buffer) };
  }
  function rowOf(t, ...index) { // the last dimension at `index` of the leading ones
    const n = t.shape[t.shape.length - 1];
    let offset = 0;
    index.forEach((i, d) => { offset = offset * t.shape[d] + i; });
    return t.data.subarray(offset * n, offset * n + n);
  }
  function matrixOf(t, ...index) { // the last two dimensions, as an array of rows
    const rows = t.shape[t.shape.length - 2];
    return Array.from({ length: rows }, (_, r) => rowOf(t, ...index, r));
  }
  function slice(row, head, dk) { return row.subarray(head * dk, (head + 1) * dk); }
  function mean(v) { return v.reduce((a, b) => a + b, 0) / v.length; }
  function std(v) { const m = mean(v); return Math.sqrt(v.reduce((a, b) => a + (b - m) ** 2, 0) / v.length); }
  function add(a, b) { return Float32Array.from(a, (x, i) => x + b[i]); }
  function fmt(x, digits = 3) { return Number.isFinite(x) ? x.toFixed(digits) : "−∞"; }
  function piece(p) { return p.replace(/^▁/, "␣"); }

  // ---- drawing
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    children.forEach((c) => e.append(c));
    return e;
  }
  function colour(x, scale) { // diverging: blue below zero, white at zero, red above
    const a = Math.max(-1, Math.min(1, x / scale));
    const w = Math.round(255 * (1 - Math.abs(a)));
    return a >= 0 ? `rgb(255,${w},${w})` : `rgb(${w},${w},255)`;
  }
  function heat(x) { return `rgba(20, 80, 200, ${Math.max(0, Math.min(1, x))})`; }
  // A vector (or the rows of a matrix) as coloured cells on a canvas; hover shows a value.
  function cells(rows, { cell = 3, height = 12, scale = null, label = "" } = {}) {
    const n = rows[0].length;
    const s = scale || Math.max(1e-6, ...rows.map((r) => Math.max(...r.map(Math.abs))));
    const canvas = el("canvas", { class: "cells", width: n * cell, height: rows.length * height });
    const ctx = canvas.getContext("2d");
    rows.forEach((r, i) => r.forEach((x, j) => {
      ctx.fillStyle = colour(x, s);
      ctx.fillRect(j * cell, i * height, cell, height);
    }));
    canvas.addEventListener("mousemove", (e) => {
      const j = Math.floor(e.offsetX / cell), i = Math.floor(e.offsetY / height);
      if (rows[i] && j < n) canvas.title = `${label}[${rows.length > 1 ? i + "," : ""}${j}] = ${fmt(rows[i][j], 4)}`;
    });
    return canvas;
  }
  function vector(name, v, opts = {}) {
    return el("div", { class: "vector" }, el("span", { class: "name", text: name }), cells([v], { label: name, ...opts }));
  }
  // A heat map (rows: queries, columns: keys) as a table: weights from 0 to 1, or `signed` values
  // (scores) in blue and red; `hidden(r, c)` greys a cell out.
  function heatTable(rows, rowLabels, colLabels, { hidden = () => false, signed = false, onRow = null } = {}) {
    const scale = signed ? Math.max(1e-6, ...rows.map((r) => Math.max(...r.map(Math.abs)))) : 1;
    const table = el("table", { class: "heat" });
    const head = table.createTHead().insertRow();
    head.append(el("th"));
    colLabels.forEach((c) => head.append(el("th", { text: piece(c) })));
    const body = table.createTBody();
    rows.forEach((row, r) => {
      const tr = body.insertRow();
      tr.append(el("th", { text: piece(rowLabels[r]) }));
      row.forEach((w, c) => {
        const td = tr.insertCell();
        if (hidden(r, c)) { td.className = "future"; return; }
        td.style.background = signed ? colour(w, scale) : heat(w);
        td.title = `${piece(rowLabels[r])} → ${piece(colLabels[c])}: ${fmt(w, 4)}`;
      });
      if (onRow) tr.addEventListener("click", () => onRow(r));
    });
    return table;
  }
  function thumbnail(rows, { hidden = () => false, cell = 3 } = {}) {
    const canvas = el("canvas", { class: "thumb", width: rows[0].length * cell, height: rows.length * cell });
    const ctx = canvas.getContext("2d");
    rows.forEach((row, r) => row.forEach((w, c) => {
      ctx.fillStyle = hidden(r, c) ? "#d0d5da" : heat(w);
      ctx.fillRect(c * cell, r * cell, cell, cell);
    }));
    return canvas;
  }
  function select(label, options, value, onChange) {
    const s = el("select");
    options.forEach(([v, text]) => s.add(new Option(text, v)));
    s.value = String(value);
    s.addEventListener("change", () => onChange(Number(s.value)));
    return el("label", {}, `${label} `, s);
  }

  // ---- the page
  function render(root, data, lang = "en") {
    const words = window.AiaynWords;
    const m = data.model, dk = m.d_k;
    const state = { lang: words[lang] ? lang : "en", panel: 0, layer: 0, head: 0, word: 0, dlayer: m.n_decoder_layers - 1,
                    dhead: 0, t: 0, step: data.search.steps.length };
    const enc = data.encoder.map((l) => Object.fromEntries(Object.entries(l).map(
      ([k, v]) => [k, Array.isArray(v) ? v : tensor(v)])));
    const input = Object.fromEntries(Object.entries(data.input).map(([k, v]) => [k, tensor(v)]));
    const decIn = Object.fromEntries(Object.entries(data.decoder.input).map(([k, v]) => [k, tensor(v)]));
    const selfW = data.decoder.self_weights.map(tensor), crossW = data.decoder.cross_weights.map(tensor);
    const topProbs = tensor(data.decoder.top.probs), chosenProbs = tensor(data.decoder.chosen);
    const positions = tensor(data.positions);
    const src = data.source.pieces, tgt = data.target.pieces; // tgt: <s>, the translation, </s>
    const tgtIn = tgt.slice(0, -1);

    function t(key, vars = {}) {
      const text = (words[state.lang] && words[state.lang][key]) || words.en[key] || key;
      return text.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? vars[k] : `{${k}}`));
    }
    function claims(panel) {
      const numbers = window.AiaynClaims[panel] || [];
      if (!numbers.length) return "";
      const list = el("ul");
      numbers.forEach((n) => {
        const text = `${t("claim_ref", { n })}: ${t("claim_" + n)}`;
        list.append(el("li", {}, data.claims_url ? el("a", { href: data.claims_url, text }) : text));
      });
      return el("aside", { class: "claims" }, el("strong", { text: t("paper") }), list);
    }
    const layerOptions = (n) => Array.from({ length: n }, (_, i) => [i, String(i + 1)]);
    const headOptions = layerOptions(m.n_heads);
    const wordOptions = src.map((p, i) => [i, `${i}: ${piece(p)}`]);
    function encoderControls(withHead = true) {
      const controls = el("div", { class: "controls" },
        select(t("layer"), layerOptions(m.n_encoder_layers), state.layer, (v) => { state.layer = v; draw(); }));
      if (withHead) controls.append(select(t("head"), headOptions, state.head, (v) => { state.head = v; draw(); }));
      controls.append(select(t("word"), wordOptions, state.word, (v) => { state.word = v; draw(); }));
      return controls;
    }

    // 1. Input: pieces and ids, embedding x sqrt(d_model) + positional encoding, the PE picture.
    function inputPanel() {
      const ids = el("table", { class: "pieces" });
      const r1 = ids.insertRow(), r2 = ids.insertRow();
      r1.append(el("th", { text: t("piece") })); r2.append(el("th", { text: t("id") }));
      src.forEach((p, i) => { r1.append(el("td", { text: piece(p) })); r2.append(el("td", { text: data.source.ids[i] })); });
      const rows = el("div", { class: "token-rows" });
      const scale = Math.max(...input.x.data.map(Math.abs));
      const header = el("div", { class: "token-row header" }, el("span", { class: "name" }),
        el("span", { text: m.scale_embedding ? t("embedding") : t("embedding_plain") }), el("span"),
        el("span", { text: t("position") }), el("span"), el("span", { text: t("sum") }));
      rows.append(header);
      src.forEach((p, i) => rows.append(el("div", { class: "token-row" }, el("span", { class: "name", text: piece(p) }),
        cells([rowOf(input.embedding, i)], { cell: 1, scale, label: "e" }), el("span", { text: "+" }),
        cells([rowOf(input.position, i)], { cell: 1, scale, label: "PE" }), el("span", { text: "=" }),
        cells([rowOf(input.x, i)], { cell: 1, scale, label: "x" }))));
      const n = positions.shape[0];
      const picture = cells(matrixOf(positions), { cell: 2, height: 4, scale: 1, label: "PE" });
      const frame = el("div", { class: "pe-frame" }, picture,
        el("div", { class: "pe-mark", style: `height:${src.length * 4}px;width:${m.d_model * 2}px` }));
      const about = m.positional === "learned" ? t("pe_learned", { n: n - 1 })
        : m.positional === "none" ? t("pe_none") : t("pe_picture", { n: n - 1, d: m.d_model, s: src.length });
      return [el("p", { text: t("input_intro") }), el("div", { class: "scroll" }, ids),
        el("p", { text: m.scale_embedding ? t("input_vectors", { scale: fmt(Math.sqrt(m.d_model), 2) }) : t("input_unscaled") }),
        rows, el("p", { text: about }), frame, claims("input")];
    }

    // 2. Self-attention: the six steps for one word, then the matrix form.
    function attentionPanel() {
      const L = enc[state.layer], h = state.head, i = state.word, sqrt = Math.sqrt(dk);
      const q = slice(rowOf(L.q, i), h, dk);
      const weights = rowOf(L.weights, h, i), scores = rowOf(L.scores, h, i);
      const vs = src.map((_, j) => slice(rowOf(L.v, j), h, dk));
      const vscale = Math.max(...vs.map((v) => Math.max(...v.map(Math.abs))));
      const table = el("table", { class: "steps" });
      const head = table.insertRow();
      [t("word"), "k", t("dot"), t("scaled"), t("softmax"), t("weighted")].forEach((x) => head.append(el("th", { text: x })));
      src.forEach((p, j) => {
        const tr = table.insertRow();
        if (j === i) tr.className = "focus";
        const weighted = Float32Array.from(vs[j], (x) => x * weights[j]);
        [el("span", { text: piece(p) }), cells([slice(rowOf(L.k, j), h, dk)], { cell: 2, label: "k" }),
          fmt(scores[j] * sqrt), fmt(scores[j]),
          el("span", { class: "bar", style: `width:${Math.round(weights[j] * 100)}px`, title: fmt(weights[j], 4) }),
          cells([weighted], { cell: 2, scale: vscale, label: "w·v" })]
          .forEach((c, k) => tr.insertCell().append(k === 4 ? el("span", {}, c, " " + fmt(weights[j])) : c));
      });
      const z = slice(rowOf(L.z, i), h, dk);
      const matrix = el("div", { class: "matrices" },
        el("figure", {}, heatTable(matrixOf(L.scores, h), src, src, { signed: true }),
          el("figcaption", { text: t("scores_matrix") })),
        el("figure", {}, heatTable(matrixOf(L.weights, h), src, src), el("figcaption", { text: t("weights_matrix") })),
        el("figure", {}, cells(src.map((_, j) => slice(rowOf(L.z, j), h, dk)), { cell: 3, height: 14, label: "Z" }),
          el("figcaption", { text: t("z_matrix") })));
      return [encoderControls(),
        el("p", { class: "lead", text: t("attention_intro", { layer: state.layer + 1, head: h + 1, word: piece(src[i]) }) }),
        el("p", { text: t("att_step1", { dk, d: m.d_model }) }),
        vector("x", rowOf(L.input, i), { cell: 1 }), vector("q", q, { cell: 4 }),
        vector("k", slice(rowOf(L.k, i), h, dk), { cell: 4 }), vector("v", slice(rowOf(L.v, i), h, dk), { cell: 4 }),
        el("p", { text: t("att_step2") }), el("p", { text: t("att_step3", { sqrt: fmt(sqrt, 2) }) }),
        el("p", { text: t("att_step4") }), el("p", { text: t("att_step5") }), table,
        el("p", { text: t("att_step6") }), vector("z", z, { cell: 4 }),
        el("p", { text: t("matrix_form") }), matrix, claims("attention")];
    }

    // 3. Many heads: every head's z, concatenated, times W^O; the model view of every layer and head.
    function headsPanel() {
      const L = enc[state.layer], i = state.word;
      const zs = el("div", { class: "heads" });
      for (let h = 0; h < m.n_heads; h++) zs.append(vector(t("head_n", { n: h + 1 }), slice(rowOf(L.z, i), h, dk), { cell: 3 }));
      const view = el("div", { class: "model-view" });
      const group = (title, maps, opts, onPick) => {
        const grid = el("div", { class: "grid", style: `grid-template-columns: repeat(${m.n_heads}, auto)` });
        maps.forEach((mapOf, layer) => { for (let h = 0; h < m.n_heads; h++) {
          const thumb = thumbnail(matrixOf(mapOf, h), opts);
          thumb.title = `${t("layer")} ${layer + 1}, ${t("head")} ${h + 1}`;
          if (onPick) thumb.addEventListener("click", () => onPick(layer, h));
          grid.append(thumb);
        } });
        view.append(el("figure", {}, grid, el("figcaption", { text: title })));
      };
      group(t("encoder_self"), enc.map((l) => l.weights), {}, (layer, h) => {
        Object.assign(state, { layer, head: h, panel: PANELS.indexOf("attention") }); draw();
      });
      group(t("decoder_self"), selfW, { hidden: (r, c) => c > r });
      group(t("cross"), crossW, {});
      return [encoderControls(false),
        el("p", { class: "lead", text: t("heads_intro", { word: piece(src[i]), layer: state.layer + 1 }) }), zs,
        vector(t("concat"), rowOf(L.z, i), { cell: 1 }), vector(t("times_wo"), rowOf(L.attention, i), { cell: 1 }),
        el("p", { text: t("model_view") }), view, claims("heads")];
    }

    // 4. Residuals, LayerNorm and the feed-forward network, for one word of one layer.
    function ffnPanel() {
      const L = enc[state.layer], i = state.word, pre = m.norm_position === "pre";
      const x = rowOf(L.input, i), a = rowOf(L.attention, i), n1 = rowOf(L.norm1, i), f = rowOf(L.feed_forward, i);
      const n2 = rowOf(L.norm2, i);
      const withStats = (name, v) => el("div", { class: "stat-row" }, vector(name, v, { cell: 1 }),
        el("span", { class: "stats", text: t("stats", { mean: fmt(mean(v)), std: fmt(std(v)) }) }));
      // post-norm: n1 = LN(x + a), out = LN(n1 + f). pre-norm: n1 = LN(x), mid = x + a, n2 = LN(mid), out = mid + f.
      const rows = pre
        ? [withStats(t("layer_input"), x), withStats(t("norm1_pre"), n1), withStats(t("attention_out"), a),
          withStats(t("residual_sum"), add(x, a)), withStats(t("norm2_pre"), n2), withStats(t("ffn_out"), f),
          withStats(t("residual_sum2"), add(add(x, a), f))]
        : [withStats(t("layer_input"), x), withStats(t("attention_out"), a), withStats(t("residual_sum"), add(x, a)),
          withStats(t("norm1"), n1), withStats(t("ffn_out"), f), withStats(t("residual_sum2"), add(n1, f)),
          withStats(t("norm2"), n2)];
      const fired = L.fired[i];
      const bars = el("div", { class: "fired" });
      src.forEach((p, j) => bars.append(el("div", { class: j === i ? "focus" : "" }, el("span", { text: piece(p) }),
        el("span", { class: "bar", style: `width:${Math.round(200 * L.fired[j] / m.d_ff)}px` }),
        el("span", { text: ` ${L.fired[j]}` }))));
      return [encoderControls(false),
        el("p", { class: "lead", text: t("ffn_intro", { layer: state.layer + 1, word: piece(src[i]),
          form: pre ? t("pre_norm") : t("post_norm") }) }), ...rows,
        el("p", { text: t("fired", { fired, dff: m.d_ff, word: piece(src[i]), share: `${Math.round(100 * fired / m.d_ff)}%` }) }),
        el("p", { text: t("fired_all") }), bars, claims("ffn")];
    }

    // 5. The decoder: masked self-attention, encoder-decoder attention, and the output distribution.
    function decoderPanel() {
      const l = state.dlayer, h = state.dhead, step = state.t;
      const controls = el("div", { class: "controls" },
        select(t("layer"), layerOptions(m.n_decoder_layers), l, (v) => { state.dlayer = v; draw(); }),
        select(t("head"), headOptions, h, (v) => { state.dhead = v; draw(); }),
        select(t("step"), tgtIn.map((p, i) => [i, `${i}: ${piece(p)}`]), step, (v) => { state.t = v; draw(); }));
      const pick = (r) => { state.t = r; draw(); };
      const top = el("table", { class: "top" });
      data.decoder.top.pieces[step].forEach((p, k) => {
        const prob = rowOf(topProbs, step)[k];
        const tr = top.insertRow();
        if (data.decoder.top.ids[step][k] === data.target.ids[step + 1]) tr.className = "focus";
        tr.insertCell().append(piece(p));
        tr.insertCell().append(el("span", { class: "bar", style: `width:${Math.round(prob * 300)}px` }));
        tr.insertCell().append(fmt(prob, 4));
      });
      return [controls,
        el("p", { class: "lead", text: t("decoder_intro", { layer: l + 1, head: h + 1 }) }),
        el("p", { text: t("masked") }),
        heatTable(matrixOf(selfW[l], h), tgtIn, tgtIn, { hidden: (r, c) => c > r, onRow: pick }),
        el("p", { text: t("cross_att") }), heatTable(matrixOf(crossW[l], h), tgtIn, src, { onRow: pick }),
        vector("x", rowOf(decIn.x, step), { cell: 1 }),
        el("p", { text: t("output_intro", { word: piece(tgtIn[step]), t: step, vocab: m.vocab_size, k: data.decoder.top.ids[step].length }) }),
        top, el("p", { class: "hint", text: `${t("chosen")}: ${piece(tgt[step + 1])} (${fmt(chosenProbs.data[step], 4)})` }),
        claims("decoder")];
    }

    // 6. The search: the beam as a tree, step by step, and the length penalty's choice.
    function searchPanel() {
      const s = data.search, shown = state.step;
      const visible = new Set([0, ...s.steps.slice(0, shown).flat()]);
      const byId = s.nodes;
      const column = 90, row = 22, ranks = Math.max(1, ...s.steps.map((x) => x.length));
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      svg.setAttribute("width", (s.steps.length + 1) * column + 60);
      svg.setAttribute("height", ranks * row + 20);
      svg.setAttribute("class", "tree");
      const place = {};
      place[0] = [10, 10 + (ranks * row) / 2];
      const path = new Set();
      for (let n = byId[s.best]; n; n = byId[n.parent]) { path.add(n.id); if (n.parent < 0) break; }
      const ns = (tag, attrs) => {
        const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
        Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
        return e;
      };
      s.steps.forEach((made, k) => made.forEach((id, r) => { place[id] = [10 + (k + 1) * column, 10 + r * row + row / 2]; }));
      byId.forEach((n) => {
        if (!visible.has(n.id) || n.parent < 0) return;
        const [x1, y1] = place[n.parent], [x2, y2] = place[n.id];
        svg.append(ns("line", { x1: x1 + 40, y1, x2, y2, class: `edge ${n.state}${path.has(n.id) ? " best" : ""}` }));
      });
      byId.forEach((n) => {
        if (!visible.has(n.id)) return;
        const [x, y] = place[n.id];
        const g = ns("g", { class: `node ${n.state}${n.id === s.best ? " chosen" : ""}${path.has(n.id) ? " best" : ""}` });
        g.append(ns("rect", { x, y: y - 9, width: 80, height: 18, rx: 4 }));
        const text = ns("text", { x: x + 4, y: y + 4 });
        text.textContent = `${piece(n.piece)} ${fmt(n.log_prob, 2)}`;
        const title = ns("title", {});
        title.textContent = `${t(n.state === "root" ? "live" : n.state)}: log P ${fmt(n.log_prob, 4)}` +
          (n.score !== null ? `, ${t("score")} ${fmt(n.score, 4)}` : "");
        g.append(text, title);
        svg.append(g);
      });
      const hyp = (n) => { const p = []; for (let x = byId[n.parent]; x && x.parent >= 0; x = byId[x.parent]) p.unshift(piece(x.piece)); return p.join(" "); };
      const finished = byId.filter((n) => n.state === "finished" && visible.has(n.id)).sort((a, b) => b.score - a.score);
      const table = el("table", { class: "finished" });
      const head = table.insertRow();
      [t("hypothesis"), t("log_prob"), t("length"), t("lp"), t("score")].forEach((x) => head.append(el("th", { text: x })));
      finished.forEach((n) => {
        const tr = table.insertRow();
        if (n.id === s.best) tr.className = "focus";
        [hyp(n), fmt(n.log_prob, 4), n.step, fmt(n.penalty, 4), fmt(n.score, 4)].forEach((c) => tr.insertCell().append(String(c)));
      });
      const slider = el("input", { type: "range", min: 1, max: s.steps.length, value: shown, class: "step-slider" });
      slider.addEventListener("input", () => { state.step = Number(slider.value); draw(); });
      const legend = el("p", { class: "legend" }, ...["live", "finished", "pruned", "best"].map((k) => el("span", { class: `key ${k}`, text: t(k) })));
      const penalty = t(s.penalty_form === "plain" ? "penalty_plain" : "penalty_gnmt", { alpha: s.alpha });
      return [el("p", { class: "lead", text: s.beam_size === 1 ? t("greedy_intro")
        : t("search_intro", { beam: s.beam_size, two_k: 2 * s.beam_size }) }),
      el("div", { class: "controls" }, el("label", {}, `${t("search_step")} ${shown} / ${s.steps.length} `, slider)),
      legend, el("div", { class: "tree-box" }, svg), el("p", { text: penalty }), table,
      el("p", { class: "result" }, el("strong", { text: `${t("translation")}: ` }), data.translation), claims("search")];
    }

    const builders = { input: inputPanel, attention: attentionPanel, heads: headsPanel, ffn: ffnPanel,
                       decoder: decoderPanel, search: searchPanel };
    function draw() {
      root.replaceChildren();
      root.lang = state.lang === "zh" ? "zh-CN" : "en";
      const langButton = el("button", { class: "lang", type: "button", text: t("language") });
      langButton.addEventListener("click", () => { state.lang = state.lang === "en" ? "zh" : "en"; draw(); });
      const header = el("header", { class: "explain-header" }, langButton, el("h2", { text: t("title") }),
        el("p", { class: "sentence" }, el("span", { text: data.sentence }), " → ", el("strong", { text: data.translation })),
        el("p", { class: "hint", text: `${t("subtitle")} ${t("model_line", m)}` }));
      const nav = el("nav", { class: "panels" });
      PANELS.forEach((name, k) => {
        const b = el("button", { type: "button", "data-panel": name, class: k === state.panel ? "active" : "",
                                 text: t("panel_" + name) });
        b.addEventListener("click", () => { state.panel = k; draw(); });
        nav.append(b);
      });
      const name = PANELS[state.panel];
      const section = el("section", { class: "panel", "data-panel": name }, el("h3", { text: t("panel_" + name) }),
        ...builders[name]());
      const prev = el("button", { type: "button", class: "prev", text: t("prev") });
      const next = el("button", { type: "button", class: "next", text: t("next") });
      prev.disabled = state.panel === 0;
      next.disabled = state.panel === PANELS.length - 1;
      prev.addEventListener("click", () => { state.panel -= 1; draw(); });
      next.addEventListener("click", () => { state.panel += 1; draw(); });
      root.append(header, nav, section, el("footer", { class: "panel-nav" }, prev, next));
    }
    draw();
    return { state, draw };
  }

  window.AiaynExplain = { render, tensor, PANELS };
})();
