// membound app: reads the forms, asks the server (which calls the membound library), draws what
// comes back. No physics here: every number shown is a number the server returned.
"use strict";

const $ = (s, el = document) => el.querySelector(s);
const $$ = (s, el = document) => [...el.querySelectorAll(s)];
const TABS = ["compare", "serve", "plan", "explain"];
const DEFAULT_DEVICES = ["h100-sxm:8", "cerebras-wse-3"];
const COLORS = { memory: "#3b6fb6", compute: "#d9822b", latency: "#8e5ea2", communication: "#3a9a5b",
                 overhead: "#b5485d", draft: "#7f7f7f", weights: "#3b6fb6", kv: "#d9822b",
                 activations: "#3a9a5b", other: "#7f7f7f" };
const SERIES = ["#3b6fb6", "#d9822b", "#3a9a5b", "#b5485d", "#8e5ea2", "#7f7f7f", "#17becf", "#bcbd22"];
let OPTIONS = { models: [], devices: [], dtypes: [], runtimes: [] };
let currentTab = "compare";

// ---- formatting (display only) -----------------------------------------------------------
function fmt(v, unit = "") {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  if (typeof v !== "number") return String(v);
  const a = Math.abs(v);
  let s;
  if (Number.isInteger(v) || a >= 1000) s = v.toLocaleString("en-US", { maximumFractionDigits: 0 });
  else if (a >= 100) s = v.toFixed(1);
  else if (a >= 1) s = v.toFixed(2);
  else if (a === 0) s = "0";
  else s = v.toPrecision(3);
  return unit ? `${s} ${unit}` : s;
}
function secs(v) {
  if (v === null || v === undefined) return "—";
  if (v === 0) return "0";
  if (v >= 1) return `${v.toFixed(2)} s`;
  if (v >= 1e-3) return `${(v * 1e3).toPrecision(3)} ms`;
  return `${(v * 1e6).toPrecision(3)} µs`;
}
const UNIT_FMT = { s: secs, "%": (v) => (v === null || v === undefined ? "—" : `${(100 * v).toPrecision(3)}%`), "": undefined };
const gb = (b) => (b >= 100e9 ? (b / 1e9).toLocaleString("en-US", { maximumFractionDigits: 0 }) : (b / 1e9).toPrecision(3));

// ---- small DOM helpers ----------------------------------------------------------------------
function h(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}
function save(blob, name) {
  const a = h("a", { href: URL.createObjectURL(blob), download: name });
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// ---- tables (with CSV download) --------------------------------------------------------------
// cols: [{key, label, fmt?}] ; rows: objects as returned by the API
function table(id, cols, rows, filename) {
  const thead = h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", { text: c.label }))));
  const tbody = h("tbody");
  for (const r of rows) {
    const tr = h("tr", { "data-hardware": r.hardware ?? null });
    for (const c of cols) {
      const v = r[c.key];
      const td = h("td", { "data-key": c.key, text: c.show ? c.show(v, r) : (c.fmt || fmt)(v) });
      if (typeof v === "number") { td.dataset.value = String(v); td.className = "num"; }
      tr.append(td);
    }
    tbody.append(tr);
  }
  const csv = () => {
    const q = (s) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
    const lines = [cols.map((c) => q(c.key)).join(",")];
    for (const r of rows) lines.push(cols.map((c) => q(r[c.key] === null || r[c.key] === undefined ? "" : String(r[c.key]))).join(","));
    save(new Blob([lines.join("\n") + "\n"], { type: "text/csv" }), filename);
  };
  const btn = h("button", { type: "button", class: "dl", "data-dl": "csv", text: "CSV" });
  btn.addEventListener("click", csv);
  return h("div", { class: "table-box" }, h("table", { id }, thead, tbody), h("div", { class: "dls" }, btn));
}

// ---- SVG charts (drawing only) ---------------------------------------------------------------
const NS = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svgRoot(w, hgt, title) {
  const root = s("svg", { xmlns: NS, width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`,
                          "font-family": "Helvetica, Arial, sans-serif", "font-size": "12" });
  root.append(s("rect", { x: 0, y: 0, width: w, height: hgt, fill: "#ffffff" }));
  root.append(s("text", { x: 10, y: 18, "font-size": "14", "font-weight": "bold", fill: "#222" }, title));
  return root;
}
function chartBox(id, svg, filename) {
  const box = h("figure", { class: "chart", id });
  box.append(svg);
  const bs = h("button", { type: "button", class: "dl", "data-dl": "svg", text: "SVG" });
  const bp = h("button", { type: "button", class: "dl", "data-dl": "png", text: "PNG" });
  const xml = () => new XMLSerializer().serializeToString(svg);
  bs.addEventListener("click", () => save(new Blob([xml()], { type: "image/svg+xml" }), `${filename}.svg`));
  bp.addEventListener("click", () => {
    const img = new Image();
    const w = +svg.getAttribute("width"), hh = +svg.getAttribute("height");
    img.onload = () => {
      const c = h("canvas", { width: 2 * w, height: 2 * hh });
      const ctx = c.getContext("2d");
      ctx.scale(2, 2); ctx.drawImage(img, 0, 0);
      c.toBlob((b) => save(b, `${filename}.png`), "image/png");
    };
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(xml());
  });
  box.append(h("div", { class: "dls" }, bs, bp));
  return box;
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// horizontal bars: items [{label, value, note}]
function hbars(title, items, unit) {
  const W = 720, left = 190, right = 120, bh = 26, top = 34;
  const H = top + items.length * (bh + 10) + 30;
  const root = svgRoot(W, H, title);
  const max = niceMax(Math.max(...items.map((i) => i.value)));
  const x = (v) => left + (W - left - right) * v / max;
  items.forEach((it, k) => {
    const y = top + k * (bh + 10);
    root.append(s("text", { x: left - 8, y: y + bh / 2 + 4, "text-anchor": "end", fill: "#222" }, it.label));
    root.append(s("rect", { x: left, y, width: Math.max(1, x(it.value) - left), height: bh, fill: SERIES[k % SERIES.length] }));
    root.append(s("text", { x: x(it.value) + 6, y: y + bh / 2 + 4, fill: "#222" }, `${fmt(it.value)} ${unit}${it.note ? "  " + it.note : ""}`));
  });
  const yAxis = H - 22;
  root.append(s("line", { x1: left, y1: yAxis, x2: W - right, y2: yAxis, stroke: "#999" }));
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4;
    root.append(s("text", { x: x(v), y: yAxis + 14, "text-anchor": "middle", fill: "#555", "font-size": "10" }, fmt(v)));
  }
  return root;
}

// stacked horizontal bars: bars [{label, parts: [{name, value}], marker: {value, label}}]
// own = true: each bar has its own scale (its total or its marker, whichever is larger), for
// memory tiers of very different sizes; the bar's label then says what the full width is
function stacked(title, bars, unit, scale = 1, max = null, own = false) {
  const W = 720, left = 190, right = 40, bh = 30, top = 34;
  const names = [...new Set(bars.flatMap((b) => b.parts.filter((p) => p.value > 0).map((p) => p.name)))];
  const H = top + bars.length * (bh + 22) + 44;
  const root = svgRoot(W, H, title);
  const total = Math.max(...bars.map((b) => Math.max(b.parts.reduce((a, p) => a + p.value, 0), b.marker ? b.marker.value : 0)));
  const mx = max || niceMax(total * scale) / scale;
  let x = (v) => left + (W - left - right) * v / mx;
  bars.forEach((b, k) => {
    const y = top + k * (bh + 22);
    if (own) {
      const bmx = 1.08 * Math.max(b.parts.reduce((a, p) => a + p.value, 0), b.marker ? b.marker.value : 0) || 1;
      x = (v) => left + (W - left - right) * v / bmx;
    }
    root.append(s("text", { x: left - 8, y: y + bh / 2 + 4, "text-anchor": "end", fill: "#222" }, b.label));
    let acc = 0;
    for (const p of b.parts) {
      if (!(p.value > 0)) continue;
      const r = s("rect", { x: x(acc), y, width: Math.max(0.5, x(acc + p.value) - x(acc)), height: bh,
                            fill: COLORS[p.name] || "#999", stroke: "#fff" });
      r.append(s("title", {}, `${p.name}: ${fmt(p.value * scale)} ${unit}`));
      root.append(r);
      acc += p.value;
    }
    if (b.marker) {
      const mxp = x(b.marker.value);
      root.append(s("line", { x1: mxp, y1: y - 4, x2: mxp, y2: y + bh + 4, stroke: "#c00", "stroke-width": 2 }));
      root.append(s("text", { x: Math.min(mxp, W - right) , y: y + bh + 16, "text-anchor": "end", fill: "#c00", "font-size": "11" }, b.marker.label));
    }
  });
  let lx = left;
  const ly = H - 14;
  for (const n of names) {
    root.append(s("rect", { x: lx, y: ly - 10, width: 12, height: 12, fill: COLORS[n] || "#999" }));
    root.append(s("text", { x: lx + 16, y: ly, fill: "#222" }, n));
    lx += 24 + 8 * n.length;
  }
  if (!own) root.append(s("text", { x: W - right, y: 18, "text-anchor": "end", fill: "#555" }, `bar width 0 – ${fmt(mx * scale)} ${unit}`));
  return root;
}

// lines/points: series [{name, pts: [{x, y, label}]}]; log axes
function lines(title, series, xlab, ylab, notes = []) {
  const W = 720, H = 420, L = 70, R = 20, T = 34, B = 50;
  const root = svgRoot(W, H, title);
  const all = series.flatMap((se) => se.pts).filter((p) => p.x > 0 && p.y > 0);
  if (!all.length) return root;
  const lo = (v) => Math.pow(10, Math.floor(Math.log10(v))), hi = (v) => Math.pow(10, Math.ceil(Math.log10(v)));
  const x0 = lo(Math.min(...all.map((p) => p.x))), x1 = hi(Math.max(...all.map((p) => p.x)));
  const y0 = lo(Math.min(...all.map((p) => p.y))), y1 = hi(Math.max(...all.map((p) => p.y)));
  const X = (v) => L + (W - L - R) * Math.log10(v / x0) / Math.log10(x1 / x0 || 10);
  const Y = (v) => H - B - (H - T - B) * Math.log10(v / y0) / Math.log10(y1 / y0 || 10);
  root.append(s("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#bbb" }));
  for (let d = x0; d <= x1 * 1.0001; d *= 10) {
    root.append(s("line", { x1: X(d), y1: T, x2: X(d), y2: H - B, stroke: "#eee" }));
    root.append(s("text", { x: X(d), y: H - B + 14, "text-anchor": "middle", fill: "#555", "font-size": "10" }, fmt(d)));
  }
  for (let d = y0; d <= y1 * 1.0001; d *= 10) {
    root.append(s("line", { x1: L, y1: Y(d), x2: W - R, y2: Y(d), stroke: "#eee" }));
    root.append(s("text", { x: L - 6, y: Y(d) + 3, "text-anchor": "end", fill: "#555", "font-size": "10" }, fmt(d)));
  }
  root.append(s("text", { x: (L + W - R) / 2, y: H - 14, "text-anchor": "middle", fill: "#222" }, xlab));
  const yl = s("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", fill: "#222",
                         transform: `rotate(-90 14 ${(T + H - B) / 2})` }, ylab);
  root.append(yl);
  series.forEach((se, k) => {
    const col = SERIES[k % SERIES.length];
    const pts = se.pts.filter((p) => p.x > 0 && p.y > 0);
    if (pts.length > 1) root.append(s("polyline", { points: pts.map((p) => `${X(p.x)},${Y(p.y)}`).join(" "), fill: "none", stroke: col, "stroke-width": 2 }));
    for (const p of pts) {
      const c = s("circle", { cx: X(p.x), cy: Y(p.y), r: 3.5, fill: col });
      if (p.label) c.append(s("title", {}, p.label));
      root.append(c);
    }
    root.append(s("rect", { x: W - R - 200, y: T + 8 + 16 * k, width: 10, height: 10, fill: col }));
    root.append(s("text", { x: W - R - 185, y: T + 17 + 16 * k, fill: "#222" }, se.name));
  });
  notes.forEach((n, k) => {
    const col = n.color || "#c00";
    root.append(s("line", { x1: X(n.x1), y1: Y(n.y1), x2: X(n.x2), y2: Y(n.y2), stroke: col, "stroke-width": 1.5, "stroke-dasharray": "4 3" }));
    root.append(s("text", { x: L + 10, y: H - B - 12 - 16 * (notes.length - 1 - k), fill: col }, `dashed: ${n.label}`));
  });
  return root;
}

// ---- forms <-> state <-> URL -----------------------------------------------------------------
const panel = (tab) => $(`#panel-${tab}`);
const panelForm = (tab) => $("form", panel(tab));

function deviceRow(spec = "") {
  const [name, chips] = spec.split(":");
  const row = h("div", { class: "device-row" },
    h("input", { class: "dev-name", list: "devices", value: name || "", spellcheck: "false", "aria-label": "device" }),
    h("input", { class: "dev-chips", type: "number", min: "1", value: chips || "", placeholder: "fewest", "aria-label": "chips" }),
    h("button", { type: "button", class: "remove", title: "remove", text: "×" }),
    h("span", { class: "err" }));
  $(".remove", row).addEventListener("click", () => { row.remove(); });
  $(".device-rows").append(row);
  return row;
}
function setDevices(specs) {
  $(".device-rows").replaceChildren();
  for (const sp of specs) deviceRow(sp);
}
function getDevices() {
  return $$(".device-row").map((r) => {
    const n = $(".dev-name", r).value.trim(), c = $(".dev-chips", r).value.trim();
    return c ? `${n}:${c}` : n;
  }).filter((x) => x);
}

function collect(tab) {
  const vals = { tab };
  for (const f of [$("#common"), panelForm(tab)]) {
    for (const el of $$("input[name], textarea[name], select[name]", f)) {
      if (el.value.trim() !== "") vals[el.name] = el.value.trim();
    }
  }
  if (tab === "compare") vals.devices = getDevices().join(",");
  return vals;
}
function restore(params) {
  const tab = TABS.includes(params.get("tab")) ? params.get("tab") : "compare";
  for (const f of [$("#common"), panelForm(tab)]) {
    for (const el of $$("input[name], textarea[name], select[name]", f)) {
      if (params.has(el.name)) el.value = params.get(el.name);
    }
  }
  if (params.get("config")) $("#config-box").open = true;
  if (tab === "compare" && params.has("devices")) setDevices(params.get("devices").split(",").filter((x) => x));
  if (tab === "serve" && params.has("device") && !params.has("devices")) $('[name="devices"]', panel("serve")).value = params.get("device");
  return tab;
}
function permalink(vals) {
  const q = new URLSearchParams(vals).toString();
  history.replaceState(null, "", `${location.pathname}?${q}`);
  $("#permalink").href = location.href;
}

const NUMBERS = ["prompt_tokens", "output_tokens", "batch", "concurrent_users", "ttft_p90_s", "min_tok_s_per_user",
                 "e2e_p90_s", "speedup", "standard_lane", "gamma", "acceptance_rate"];
function toBody(vals) {
  const b = {};
  for (const [k, v] of Object.entries(vals)) {
    if (k === "tab") continue;
    b[k] = NUMBERS.includes(k) && v !== "" && !Number.isNaN(Number(v)) ? Number(v) : v;
  }
  for (const k of ["devices", "hardware", "weight_dtypes"]) if (k in b) b[k] = b[k].split(",").map((x) => x.trim()).filter((x) => x);
  if (b.config) delete b.model;
  return b;
}

// ---- errors next to the field ---------------------------------------------------------------
function clearErrors() {
  for (const e of $$(".err")) e.textContent = "";
  for (const e of $$("[aria-invalid]")) e.removeAttribute("aria-invalid");
  $("#status").textContent = ""; $("#status").className = "";
}
function showError(tab, data) {
  const msg = data.error || "the server gave no message";
  let spot = null;
  if (tab === "compare" && data.field === "devices" && data.index !== null && data.index !== undefined) {
    const row = $$(".device-row")[data.index];
    if (row) { spot = $(".err", row); $(".dev-name", row).setAttribute("aria-invalid", "true"); }
  }
  if (!spot && data.field) {
    spot = $(`.err[data-for="${data.field}"]`, panel(tab)) || $(`#common .err[data-for="${data.field}"]`);
    if (data.field === "config") $("#config-box").open = true;
    const input = $(`[name="${data.field}"]`, panel(tab)) || $(`#common [name="${data.field}"]`);
    if (input) input.setAttribute("aria-invalid", "true");
  }
  if (spot) spot.textContent = msg;
  $("#status").textContent = spot ? "Check the marked field." : msg;
  $("#status").className = "error";
  $(".out", panel(tab)).replaceChildren();
}

// ---- the panels' renderers -------------------------------------------------------------------
// how each answer's constants were set: one line per runtime the answers ran
function calibrationNotes(out, items) {
  const seen = new Map();      // one line per distinct (runtime, note)
  for (const c of items) if (c) seen.set(`${c.runtime}\u0000${c.note}`, c);
  const box = h("div", { class: "calibration", id: `${out.parentElement.id}-calibration` },
    h("span", { class: "legend", text: "calibration" }));
  for (const c of seen.values()) {
    const note = c.note.startsWith(`${c.runtime}:`) ? c.note.slice(c.runtime.length + 1).trim() : c.note;
    box.append(h("p", { class: "note", "data-runtime": c.runtime, "data-note": c.note }, h("b", { text: c.runtime }), `: ${note}`));
  }
  out.append(box);
}
const priceShow = (v, r) => (v === null || v === undefined
  ? (r.price_usd_per_hour === null || r.price_usd_per_hour === undefined ? "no price: enter one" : "—") : fmt(v));
const RENDER = {
  compare(d, out) {
    const cols = [
      { key: "hardware", label: "device" }, { key: "n_chips", label: "chips" },
      { key: "parallel", label: "layout" },
      { key: "decode_tok_s_per_user", label: "tok/s/user" },
      { key: "decode_tok_s_total", label: "tok/s total" },
      { key: "ttft_s", label: d.mode === "served" ? "TTFT median" : "TTFT", fmt: secs },
      { key: "price_usd_per_hour", label: "$/chip-hour", show: (v) => (v === null || v === undefined ? "none" : v.toFixed(2)) },
      { key: "cost_per_million_tokens_usd", label: "$/M tok", show: priceShow },
      { key: "bound", label: "bound" },
      d.mode === "served"
        ? { key: "kv_occupancy", label: "KV cache in use", fmt: UNIT_FMT["%"] }
        : { key: "memory_used_bytes", label: "GB/chip used/has", show: (v, r) => `${gb(v)} / ${gb(r.memory_capacity_bytes)}` },
      { key: "speedup_vs_first", label: "× first", show: (v) => `${v.toFixed(2)}×` },
      { key: "calibration", label: "calibration", show: (v) => v.runtime },
    ];
    const w = d.workload;
    const load = d.mode === "served" ? `${w.batch} clients served (continuous batching)` : `batch ${w.batch}`;
    out.append(h("p", { class: "summary", text: `${d.model}: ${load}, prompt ${w.prompt_tokens}, output ` +
      `${w.output_tokens} tokens, weights ${w.weight_dtype}, runtime ` +
      `${w.runtime || [...new Set(d.rows.map((r) => r.calibration.runtime))].join(", ")}` }));
    if (d.speculative) out.append(h("p", { class: "note", id: "compare-speculative", text: d.speculative }));
    out.append(table("compare-table", cols, d.rows, "membound-compare.csv"));
    // chips sold as an API: the provider's published price per token beside the physics' cost
    for (const r of d.rows) if (r.api_price) out.append(h("p", { class: "note api-price", "data-hardware": r.hardware,
      text: `${r.hardware}: API price: ${r.api_price}` }));
    calibrationNotes(out, d.rows.map((r) => r.calibration));
    for (const dr of d.dropped) {
      const row = $$(".device-row")[dr.index];
      if (row) { $(".err", row).textContent = dr.error; $(".dev-name", row).setAttribute("aria-invalid", "true"); }
      out.append(h("p", { class: "note", text: `left out ${dr.device}: ${dr.error}` }));
    }
    if (d.rows.length) {
      out.append(chartBox("compare-chart", hbars(`${d.model}: decode tok/s per user`,
        d.rows.map((r) => ({ label: `${r.n_chips} × ${r.hardware}`, value: r.decode_tok_s_per_user, note: `(${r.bound})` })),
        "tok/s"), "membound-compare"));
    }
  },

  explain(d, out) {
    const r = d.row, t = d.step_terms_s, m = d.memory;
    out.append(h("p", { class: "summary", text: `${d.model} on ${r.n_chips} × ${r.hardware} (${r.parallel}): ` +
      `${fmt(r.decode_tok_s_per_user)} tok/s per user, ${secs(d.tpot_s)} per output token, bound: ${r.bound}` }));
    const parts = Object.entries(t).map(([name, v]) => ({ name, value: v * 1e3 }));
    out.append(chartBox("explain-terms", stacked("Step terms per output token (ms, at the mean context)",
      [{ label: "terms stacked", parts, marker: { value: d.tpot_s * 1e3, label: `step ${secs(d.tpot_s)}` } },
       ...parts.filter((p) => p.value > 0).map((p) => ({ label: p.name, parts: [p] }))], "ms"), "membound-step-terms"));
    out.append(h("p", { class: "note", text: "Memory, compute and the latency floor overlap: a step takes the largest " +
      "of them (plus a runtime's non-overlapped share), then adds communication and overhead. The red line is the step the library computed." }));
    const mem = [{ label: "per chip", parts: [{ name: "weights", value: m.weights_bytes / 1e9 }, { name: "kv", value: m.kv_bytes / 1e9 },
      { name: "activations", value: m.activation_bytes / 1e9 }, { name: "other", value: m.other_bytes / 1e9 }],
      marker: { value: m.capacity_bytes / 1e9, label: `capacity ${gb(m.capacity_bytes)} GB` } }];
    if (m.placement.length > 1) {
      for (const p of m.placement) mem.push({ label: p.tier, parts: [{ name: "weights", value: p.weights_bytes / 1e9 },
        { name: "kv", value: p.kv_bytes / 1e9 }], marker: { value: p.capacity_bytes / 1e9, label: `${p.tier} ${gb(p.capacity_bytes)} GB` } });
    }
    const used = (b) => b.parts.reduce((a, p) => a + p.value, 0);
    for (const b of mem) b.label = `${b.label}: ${fmt(used(b))} GB`;
    out.append(chartBox("explain-memory", stacked(`Memory per chip (GB; each bar to its own capacity)${m.fits ? "" : ": DOES NOT FIT"}`,
      mem, "GB", 1, null, true), "membound-memory"));
    out.append(table("explain-table", [{ key: "term", label: "term" }, { key: "seconds", label: "seconds per token", fmt: secs }],
      Object.entries(t).map(([term, seconds]) => ({ term, seconds })), "membound-step-terms.csv"));
  },

  plan(d, out) {
    out.append(h("p", { class: "summary", text: d.explanation }));
    for (const n of d.notes) out.append(h("p", { class: "note", text: n }));
    if (d.ranked.length) {
      out.append(table("plan-table", d.columns.map((c) => ({ key: c.key, label: c.label, fmt: UNIT_FMT[c.unit] })),
        d.ranked, "membound-plan.csv"));
    }
    const by = {};
    for (const f of d.frontier) (by[f.hardware] = by[f.hardware] || []).push({ x: f.tok_s_per_user, y: f.tok_s_per_chip, label: f.label });
    const series = Object.entries(by).map(([name, pts]) => ({ name, pts: pts.sort((a, b) => a.x - b.x) }));
    if (series.length) out.append(chartBox("plan-chart", lines(`Interactivity frontier (${d.planner} planner)`, series,
      "tok/s per user", "output tok/s per chip"), "membound-frontier"));
  },

  serve(d, out) {
    const load = d.load === "concurrency" ? (p) => `${p.concurrency} clients` : (p) => `${p.arrival_rate} req/s`;
    const name = (c) => `${c.n_chips} × ${c.hardware}`;
    out.append(h("p", { class: "summary", text: `${d.model} on ${d.curves.map((c) => `${name(c)} (${c.parallel})`).join(", ")}, ` +
      `runtime ${d.runtime}` }));
    if (d.speculative) out.append(h("p", { class: "note", id: "serve-speculative", text: d.speculative }));
    const series = d.curves.map((c) => ({ name: name(c), pts: c.points.map((p) => ({ x: p.tok_s_per_user,
      y: p.output_tok_s_per_chip, label: `${name(c)}: ${load(p)}` })) }));
    const notes = d.curves.map((c, k) => ({ fm: c.fast_mode, c, k })).filter((n) => n.fm).map(({ fm, c, k }) => ({
      x1: fm.slow.tok_s_per_user, y1: fm.slow.output_tok_s_per_chip, x2: fm.fast.tok_s_per_user,
      y2: fm.fast.output_tok_s_per_chip, color: SERIES[k % SERIES.length],
      label: `${name(c)}: ` + (fm.price_ratio === null ? `${fm.speedup.toFixed(2)}× speed`
        : `${fm.speedup.toFixed(2)}× speed for ${fm.price_ratio.toFixed(2)}× price`) }));
    out.append(chartBox("serve-chart", lines("Served: output tok/s per chip vs tok/s per user", series, "tok/s per user",
      "output tok/s per chip", notes), "membound-serve"));
    d.curves.forEach((c, k) => {
      if (c.fast_mode) out.append(h("p", { class: "reading", id: k === 0 ? "fast-mode" : `fast-mode-${k}`,
        "data-hardware": c.hardware, text: d.curves.length > 1 ? `${name(c)}: ${c.fast_mode.reading}` : c.fast_mode.reading }));
      for (const n of c.notes || []) out.append(h("p", { class: "note", text: d.curves.length > 1 ? `${name(c)}: ${n}` : n }));
    });
    const rows = d.curves.flatMap((c) => c.points.map((p) => ({ ...p, hardware: c.hardware, device: name(c) })));
    out.append(table("serve-table", [{ key: "device", label: "device" },
      ...d.columns.map((c) => ({ key: c.key, label: c.label, fmt: UNIT_FMT[c.unit] }))], rows, "membound-serve.csv"));
    calibrationNotes(out, d.curves.map((c) => c.calibration));
  },
};

async function run(tab) {
  clearErrors();
  const vals = collect(tab);
  permalink(vals);
  const out = $(".out", panel(tab));
  $("#status").textContent = "computing…";
  document.body.dataset.state = "busy";
  try {
    const res = await fetch(`/api/${tab}`, { method: "POST", headers: { "Content-Type": "application/json" },
                                             body: JSON.stringify(toBody(vals)) });
    let data;
    try { data = await res.json(); } catch { data = { error: `the server answered HTTP ${res.status}` }; }
    if (!res.ok) { showError(tab, data); return; }
    out.replaceChildren();
    RENDER[tab](data, out);
    $("#status").textContent = "";
  } catch (e) {
    showError(tab, { error: `no answer from the server (${e.message})` });
  } finally {
    document.body.dataset.state = "ready";
  }
}

function showTab(tab) {
  currentTab = tab;
  for (const t of TABS) {
    panel(t).hidden = t !== tab;
    $(`#tabs [data-tab="${t}"]`).setAttribute("aria-selected", String(t === tab));
  }
}

async function init() {
  try {
    const r = await fetch("/api/options");
    OPTIONS = await r.json();
  } catch { /* the pickers stay empty; typing still works */ }
  const fill = (id, values) => $(`#${id}`).replaceChildren(...values.map((v) => h("option", { value: v })));
  fill("models", OPTIONS.models || []);
  fill("devices", (OPTIONS.devices || []).map((d) => d.name));
  fill("dtypes", OPTIONS.dtypes || []);
  fill("runtimes", OPTIONS.runtimes || []);
  fill("drafts", ["mtp", ...(OPTIONS.models || [])]);
  setDevices(DEFAULT_DEVICES);
  $(".add-device").addEventListener("click", () => deviceRow("").querySelector("input").focus());
  for (const t of TABS) {
    $(`#tabs [data-tab="${t}"]`).addEventListener("click", () => { showTab(t); run(t); });
    panelForm(t).addEventListener("submit", (e) => { e.preventDefault(); run(t); });
  }
  $("#common").addEventListener("submit", (e) => { e.preventDefault(); run(currentTab); });
  const tab = restore(new URLSearchParams(location.search));
  showTab(tab);
  await run(tab);
  document.body.dataset.firstRenderMs = performance.now().toFixed(1);   // read by benchmarks/bench_app.py
}
document.addEventListener("DOMContentLoaded", init);
