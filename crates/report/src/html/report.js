// memreplay report: draws the page from its one data island (#report-data).
// Hand-written, no library, loads nothing. Schema: replay-cli/JSON.md, "report".
(function () {
  'use strict';

  const SVGNS = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- helpers
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const k of kids.flat()) if (k != null) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  function s(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    for (const k of kids.flat()) if (k != null) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') e.setAttribute('class', v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
  }
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function bytes(n) {
    if (n == null) return '-';
    const neg = n < 0;
    let v = Math.abs(n);
    let u = 0;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    const t = u === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1);
    return (neg ? '-' : '') + t + ' ' + UNITS[u];
  }
  function signedBytes(n) { return (n > 0 ? '+' : '') + bytes(n); }
  function count(n) { return n == null ? '-' : Math.round(n).toLocaleString('en-US'); }
  function ms(ns) {
    if (ns == null) return '-';
    const m = ns / 1e6;
    if (m >= 10000) return (m / 1000).toFixed(2) + ' s';
    if (m >= 100) return m.toFixed(1) + ' ms';
    return m.toFixed(3) + ' ms';
  }
  function msShort(ns) {
    const m = ns / 1e6;
    if (m >= 1000) return +(m / 1000).toFixed(3) + ' s';
    return +m.toFixed(3) + ' ms';
  }
  function pct(x) { return x == null ? '-' : (x * 100).toFixed(1) + ' %'; }
  function plural(n, w) { return count(n) + ' ' + w + (n === 1 ? '' : 's'); }
  function hashHue(str) {
    let x = 2166136261;
    for (let i = 0; i < str.length; i++) { x ^= str.charCodeAt(i); x = Math.imul(x, 16777619); }
    return (x >>> 0) % 360;
  }
  const PALETTE = ['#2f6fde', '#d9622b', '#1f9d8a', '#8a4fd1', '#c23f7a', '#5c8a1f', '#b7791f', '#3d5a80'];
  function lowerBound(arr, x) { // first index with arr[i] > x, minus one: the last <= x
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] <= x) lo = mid + 1; else hi = mid; }
    return lo - 1;
  }

  // ---------------------------------------------------------------- data
  const D = JSON.parse($('report-data').textContent);
  const S = D.summary;
  const TL = D.timeline;
  const T = D.tree;
  const N = T.nodes.parent.length;
  const DOMAINS = S.domains.map((d, i) => ({ i, ref: d.domain, sum: d, group: D.domain_groups[i], color: PALETTE[i % PALETTE.length] }));
  const END_NS = TL.edges_ns[TL.edges_ns.length - 1];

  const kids = Array.from({ length: N }, () => []);
  const depth = new Int32Array(N);
  for (let i = 1; i < N; i++) { const p = T.nodes.parent[i]; kids[p].push(i); depth[i] = depth[p] + 1; }
  const fullName = (i) => i === 0 ? '(all)' : (T.nodes.elided[i] ? '… ' + T.nodes.name[i] : (T.types[T.nodes.type[i]] + ':' + T.nodes.name[i]));
  function path(i) {
    const parts = [];
    for (let n = i; n > 0; n = T.nodes.parent[n]) parts.push(fullName(n));
    return parts.reverse().join(' / ') || '(all)';
  }
  const typeColor = (i) => {
    if (T.nodes.elided[i]) return '#c5cad3';
    const ty = T.types[T.nodes.type[i]] || '';
    return 'hsl(' + hashHue(ty) + ', 55%, ' + (72 - Math.min(depth[i], 6) * 4) + '%)';
  };

  // Figures per (domain, point): own and inclusive bytes and counts, from the triples.
  const cache = new Map();
  function expand(triples) {
    const a = new Float64Array(N), b = new Float64Array(N);
    for (let k = 0; k < triples.length; k += 3) { a[triples[k]] += triples[k + 1]; b[triples[k]] += triples[k + 2]; }
    return [a, b];
  }
  function inclusive(arr) {
    const out = Float64Array.from(arr);
    for (let i = N - 1; i > 0; i--) out[T.nodes.parent[i]] += out[i];
    return out;
  }
  function figures(key, triples) {
    let f = cache.get(key);
    if (!f) {
      const [ob, oc] = expand(triples);
      f = { ownBytes: ob, ownCount: oc, bytes: inclusive(ob), count: inclusive(oc) };
      cache.set(key, f);
    }
    return f;
  }
  const EMPTY = { ownBytes: new Float64Array(N), ownCount: new Float64Array(N), bytes: new Float64Array(N), count: new Float64Array(N) };
  const at = (d, p) => p < 0 ? EMPTY : figures('p' + d + ':' + p, T.own[d][p]);
  const allocated = (d) => figures('t' + d, T.total[d]);
  const usage = (p) => figures('u' + p, T.usage[p]);

  // Table column groups: heap (top-level CPU domains) and VRAM (GPU domains); pools only
  // when nothing else is reported (their bytes already sit in a heap block).
  const GROUPS = [];
  const cpu = DOMAINS.filter((d) => d.group === 'cpu').map((d) => d.i);
  const gpu = DOMAINS.filter((d) => d.group === 'gpu').map((d) => d.i);
  if (cpu.length) GROUPS.push({ name: cpu.length === 1 ? 'Heap' : 'Heap (' + cpu.map((i) => DOMAINS[i].ref.name).join(', ') + ')', domains: cpu });
  if (gpu.length) GROUPS.push({ name: 'VRAM', domains: gpu });
  if (!GROUPS.length) for (const d of DOMAINS) GROUPS.push({ name: d.ref.name, domains: [d.i] });
  const TOP_DOMAINS = GROUPS.flatMap((g) => g.domains);

  // ---------------------------------------------------------------- view state
  const view = {
    point: D.initial_point,
    base: null, // tree point (or -1: the start, nothing live) the Δ column compares with
    range: null, // {t0, t1} ns
    rangeFrom: null, rangeTo: null, // select values
    tmDomain: 0,
    tmRoot: 0,
    sort: { key: 'g0_bytes', dir: -1 },
    expanded: new Set([0]),
    filter: null, // {test(name)} or null
    highlight: -1,
    hidden: new Set(), // legend entries switched off
    capScale: false,
  };
  for (const k of kids[0]) view.expanded.add(k);
  {
    // The treemap opens on the domain with the highest peak, the heap first on a tie.
    const live = (d) => at(d.i, view.point).bytes[0];
    let best = -1;
    for (const d of DOMAINS) if (best < 0 || live(d) > live(DOMAINS[best])) best = d.i;
    if (best >= 0 && !(live(DOMAINS[best]) > 0)) for (const d of DOMAINS) if (d.sum.peak.bytes > DOMAINS[best].sum.peak.bytes) best = d.i;
    view.tmDomain = Math.max(0, best);
  }

  const pointName = (p) => {
    if (p === -1) return 'the start';
    const pt = T.points[p];
    if (pt.kind === 'end') return 'the end (' + ms(pt.time_ns) + ')';
    if (pt.kind === 'peak') return "each domain's peak";
    if (pt.kind === 'label') return 'label "' + pt.name + '" (' + ms(pt.time_ns) + ')';
    return pt.name + ' (' + ms(pt.time_ns) + ')';
  };

  // ---------------------------------------------------------------- tooltip
  const tip = $('tooltip');
  function showTip(evt, content) {
    tip.replaceChildren(content);
    tip.hidden = false;
    const pad = 14, w = tip.offsetWidth, hgt = tip.offsetHeight;
    let x = evt.clientX + pad, y = evt.clientY + pad;
    if (x + w > window.innerWidth - 4) x = evt.clientX - w - pad;
    if (y + hgt > window.innerHeight - 4) y = evt.clientY - hgt - pad;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { tip.hidden = true; }

  // ---------------------------------------------------------------- header, summary cards
  function renderHeader() {
    const c = S.capture;
    document.title = 'memreplay: ' + S.path;
    $('log-path').textContent = S.path;
    $('capture-line').textContent = [
      c.start_utc, 'pid ' + c.pid + (c.exe_path ? ' ' + c.exe_path : ''), c.os + '/' + c.arch,
      'recorded by ' + c.recorder + ' (format ' + c.format_version + ')',
    ].join(' · ');
    const i = S.integrity;
    const badge = $('integrity-badge');
    badge.textContent = i.clean ? 'complete, no damage' : (i.complete ? 'DAMAGED' : 'TRUNCATED');
    badge.className = 'badge ' + (i.clean ? 'ok' : 'bad');
  }

  function card(k, v, sub, cls, style) {
    return h('div', { class: 'card ' + (cls || ''), style }, h('div', { class: 'k' }, k), h('div', { class: 'v' }, v), sub ? h('div', { class: 's' }, sub) : null);
  }
  function renderCards() {
    const c = S.capture, box = $('summary');
    const frames = c.frames ? c.frames + ' frames (' + c.first_frame + '–' + c.last_frame + ')' : 'no frames';
    box.append(card('Duration', (c.duration_is_lower_bound ? '≥ ' : '') + ms(c.duration_ns), count(c.events) + ' events · ' + frames));
    const threads = c.threads.filter((t) => t.stream !== 0 || t.name);
    box.append(card('Threads', String(threads.length), threads.map((t) => (t.name || '(unnamed)') + ' ' + count(t.events)).join(', ')));
    for (const d of DOMAINS) {
      const sm = d.sum;
      if (!sm.total.count && !sm.peak.count) continue;
      const cap = d.ref.capacity;
      const sub = [
        'peak ' + bytes(sm.peak.bytes) + ' at ' + ms(sm.peak.time_ns) + (sm.peak.frame != null ? ', frame ' + sm.peak.frame : '') + (sm.peak.after_label ? ', after "' + sm.peak.after_label + '"' : ''),
        bytes(sm.total.bytes) + ' allocated in ' + plural(sm.total.count, 'allocation'),
        d.ref.kind + (d.ref.parent_name ? ' within ' + d.ref.parent_name : '') + (cap ? ' · capacity ' + bytes(cap) : ''),
      ];
      const el = card(d.ref.name + ' · ' + S.at, bytes(sm.live.bytes), sub.join('\n'), 'domain', '--c:' + d.color);
      el.querySelector('.s').style.whiteSpace = 'pre-line';
      if (cap) el.append(h('div', { class: 'bar', title: 'peak against capacity' }, h('i', { style: 'width:' + Math.min(100, 100 * sm.peak.bytes / cap).toFixed(2) + '%' })));
      box.append(el);
    }
    const a = S.anomalies;
    const an = [[a.untracked_frees, 'frees of memory allocated before the recording'], [a.double_frees, 'double frees'], [a.overlapping_allocs, 'overlapping allocations'], [a.unresolved_attaches, 'unresolved attaches'], [a.unbalanced_pops, 'unbalanced pops'], [a.usage_without_allocation, 'usage reports without an allocation'], [a.impossible_sizes, 'allocations past the end of the address space (byte figures are wrong)']].filter((x) => x[0] > 0);
    const serious = a.double_frees + a.overlapping_allocs + a.unresolved_attaches + a.unbalanced_pops + a.usage_without_allocation + a.impossible_sizes;
    box.append(card('Anomalies', an.length ? String(an.reduce((s2, x) => s2 + x[0], 0)) : 'none', an.map((x) => count(x[0]) + ' ' + x[1]).join(', ') || 'the log adds up', serious ? 'warn' : ''));
    const i = S.integrity;
    const lost = [];
    if (i.bytes_lost) lost.push(bytes(i.bytes_lost) + ' lost');
    if (i.events_in_bad_blocks) lost.push(count(i.events_in_bad_blocks) + ' events in damaged blocks');
    if (i.lost_events) lost.push(count(i.lost_events) + ' events lost by the recorder');
    box.append(card('Integrity', i.clean ? 'clean' : (i.complete ? 'damaged' : 'truncated'), (lost.join(', ') || 'no events lost') + (i.damage.length ? '; ' + i.damage.join('; ') : ''), i.clean ? '' : 'warn'));
    const pm = S.process_memory;
    if (pm) {
      box.append(card('Process resident', bytes(pm.resident.peak) + ' peak', 'at the end ' + bytes(pm.resident.end) + '; tracked ' + bytes(pm.tracked_end) + ' (' + pm.tracked_domains.join(', ') + '), untracked ' + bytes(pm.untracked_resident_end) + ' · ' + plural(pm.samples, 'sample')));
    }
  }

  // ---------------------------------------------------------------- timeline
  const lanes = []; // {domain, y, h, max, series}
  let tlGeom = null;
  let drag = null; // a range being dragged on the timeline: {t0, x0}
  function endDrag(evt) {
    if (!drag || !tlGeom) return;
    const d0 = drag;
    drag = null;
    if (Math.abs(evt.clientX - d0.x0) < 4) return;
    const t1 = tlGeom.toNs(evt);
    setRange(Math.min(d0.t0, t1), Math.max(d0.t0, t1));
  }
  function timelineLegend() {
    const box = $('legend');
    box.replaceChildren();
    const item = (key, label, color, kind) => {
      const it = h('span', { class: 'item' + (view.hidden.has(key) ? ' off' : ''), 'data-key': key, title: 'show or hide' },
        h('span', { class: 'sw ' + (kind || ''), style: kind === 'dash' || kind === 'dot' ? 'border-color:' + color : 'background:' + color }), label);
      it.addEventListener('click', () => { if (view.hidden.has(key)) view.hidden.delete(key); else view.hidden.add(key); renderTimeline(); });
      box.append(it);
    };
    for (const sr of TL.domains) item('d' + sr.domain, TL.domains.length > 1 ? sr.name : sr.name + ' (tracked)', DOMAINS[sr.domain].color, 'line');
    for (const b of TL.budgets || []) {
      const name = DOMAINS[b.domain].ref.name;
      item('b' + b.domain, name + ' budget (driver)', DOMAINS[b.domain].color, 'dash');
      item('u' + b.domain, name + ' usage (driver)', DOMAINS[b.domain].color, 'dot');
    }
    if (TL.process) {
      item('resident', 'process resident (OS)', '#444b5a', 'dash');
      if (TL.process.committed.some((v) => v > 0)) item('committed', 'process committed (OS)', '#9aa3b5', 'dash');
    }
    if (DOMAINS.some((d) => d.ref.capacity > 0)) box.append(h('span', { class: 'item', style: 'cursor:default' }, h('span', { class: 'sw dash', style: 'border-color:#c8372d' }), 'capacity'));
    if (TL.labels.length) box.append(h('span', { class: 'item', style: 'cursor:default' }, h('span', { class: 'sw', style: 'background:#fff;border:1px solid #8a93a6' }), 'label'));
    box.append(h('span', { class: 'item', style: 'cursor:default' }, h('span', { class: 'sw', style: 'background:#c8372d;width:8px;height:8px;transform:rotate(45deg)' }), 'peak'));
  }

  function niceTicks(max, n) {
    if (max <= 0) return [0];
    const raw = max / n;
    const mag = Math.pow(2, Math.floor(Math.log2(raw)));
    const cands = [1, 2, 4, 8].map((k) => k * mag);
    const step = cands.find((c) => c >= raw) || cands[cands.length - 1];
    const out = [];
    for (let v = 0; v <= max * 1.0001; v += step) out.push(v);
    return out;
  }
  function timeTicks(span, n) {
    const raw = span / n;
    const mag = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    const step = [1, 2, 5, 10].map((k) => k * mag).find((c) => c >= raw) || 10 * mag;
    const out = [];
    for (let v = 0; v <= span; v += step) out.push(v);
    return out;
  }

  function renderTimeline() {
    timelineLegend();
    const box = $('timeline');
    box.replaceChildren();
    lanes.length = 0;
    const W = Math.max(480, box.clientWidth || 900);
    const ML = 76, MR = 18, TOP = 42, BOTTOM = 34, GAP = 14;
    const plotW = W - ML - MR;
    const x = (ns) => ML + (END_NS > 0 ? ns / END_NS : 0) * plotW;
    let y0 = TOP;
    const series = TL.domains.filter((sr) => DOMAINS[sr.domain].sum.total.count > 0 || sr.high.some((v) => v > 0));
    const firstCpu = series.find((sr) => DOMAINS[sr.domain].group === 'cpu');
    for (const sr of series) {
      const d = DOMAINS[sr.domain];
      const withProcess = TL.process && sr === firstCpu;
      const hgt = withProcess ? 150 : 104;
      let max = view.hidden.has('d' + sr.domain) ? 0 : Math.max(0, ...sr.high);
      if (withProcess) {
        if (!view.hidden.has('resident')) max = Math.max(max, ...TL.process.resident);
        if (!view.hidden.has('committed')) max = Math.max(max, ...TL.process.committed);
      }
      const budget = (TL.budgets || []).find((b) => b.domain === sr.domain);
      if (budget && !view.hidden.has('b' + sr.domain)) max = Math.max(max, ...budget.budget);
      if (budget && !view.hidden.has('u' + sr.domain)) max = Math.max(max, ...budget.usage);
      if (view.capScale && d.ref.capacity) max = Math.max(max, d.ref.capacity);
      if (max <= 0) max = Math.max(1, ...sr.high);
      lanes.push({ sr, d, y: y0, h: hgt, max: max * 1.08, withProcess, budget });
      y0 += hgt + GAP;
    }
    const H = y0 - GAP + BOTTOM;
    const svg = s('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'memory over time' });
    tlGeom = { x, ML, plotW, TOP, H, BOTTOM, W };

    // Time axis (top) and frame axis (bottom).
    const axT = s('g', { class: 'axis time-axis' });
    for (const t of timeTicks(END_NS, Math.max(2, Math.floor(plotW / 110)))) {
      axT.append(s('line', { class: 'grid', x1: x(t), x2: x(t), y1: TOP, y2: H - BOTTOM }));
      axT.append(s('text', { x: x(t), y: TOP - 30, 'text-anchor': 'middle' }, msShort(t)));
    }
    axT.append(s('text', { x: 4, y: TOP - 30 }, 'time'));
    svg.append(axT);
    const axF = s('g', { class: 'axis frame-axis' });
    axF.append(s('text', { x: 4, y: H - 10 }, 'frame'));
    const fr = TL.frames;
    if (fr.frame.length) {
      // A tick at every frame start there is room for, labelled when 48 px from the last.
      let lastTick = -1e9, lastText = -1e9;
      for (let k = 0; k < fr.frame.length; k++) {
        const xx = x(fr.time_ns[k]);
        if (xx - lastTick >= 3) {
          axF.append(s('line', { x1: xx, x2: xx, y1: H - BOTTOM, y2: H - BOTTOM + 4, stroke: '#b5bccb' }));
          lastTick = xx;
        }
        if (xx - lastText >= 48) {
          axF.append(s('line', { x1: xx, x2: xx, y1: H - BOTTOM, y2: H - BOTTOM + 7, stroke: '#6b7385' }));
          axF.append(s('text', { x: xx, y: H - 12, 'text-anchor': 'middle' }, String(fr.frame[k])));
          lastText = xx;
        }
      }
    } else {
      axF.append(s('text', { x: ML, y: H - 12 }, 'no frames recorded'));
    }
    svg.append(axF);

    for (const lane of lanes) drawLane(svg, lane, x);

    // Labels: one marker each, across every lane.
    const marks = s('g', { class: 'labels' });
    const rowEnds = [-1e9, -1e9, -1e9];
    TL.labels.forEach((lb, li) => {
      const xx = x(lb.time_ns);
      const active = lb.point != null && lb.point === view.point && !view.range;
      const g = s('g', { class: 'label-marker' + (active ? ' active' : ''), 'data-label': li });
      const text = lb.name.length > 22 ? lb.name.slice(0, 21) + '…' : lb.name;
      const tw = Math.min(160, 8 + text.length * 6.2);
      const tx = Math.min(Math.max(xx - tw / 2, 0), W - tw);
      // Two rows of flags; a label that fits in neither gets only its line (and title).
      const row = rowEnds.findIndex((end) => tx > end + 3);
      g.append(s('line', { x1: xx, x2: xx, y1: TOP - 2, y2: H - BOTTOM }));
      if (row >= 0) {
        rowEnds[row] = tx + tw;
        const yy = row === 0 ? TOP - 17 : TOP + 2 + (row - 1) * 17;
        g.append(s('rect', { x: tx, y: yy, width: tw, height: 15, rx: 3 }));
        g.append(s('text', { x: tx + tw / 2, y: yy + 11, 'text-anchor': 'middle' }, text));
      }
      g.append(s('title', null, lb.name + ' at ' + ms(lb.time_ns) + (lb.frame != null ? ', frame ' + lb.frame : '')));
      g.addEventListener('click', (e) => {
        e.stopPropagation();
        clearRange(false);
        if (lb.point != null) setPoint(lb.point);
      });
      marks.append(g);
    });

    // Hover and drag.
    const overlay = s('rect', { class: 'overlay', x: ML, y: TOP, width: plotW, height: H - TOP - BOTTOM });
    const cursor = s('line', { class: 'cursor', y1: TOP, y2: H - BOTTOM, x1: -10, x2: -10 });
    const sel = s('rect', { class: 'range-rect', y: TOP, height: H - TOP - BOTTOM, x: 0, width: 0, visibility: 'hidden' });
    svg.append(sel, overlay, cursor, marks);
    if (view.range) {
      sel.setAttribute('x', x(view.range.t0));
      sel.setAttribute('width', Math.max(1, x(view.range.t1) - x(view.range.t0)));
      sel.setAttribute('visibility', 'visible');
    } else if (T.points[view.point].time_ns != null && T.points[view.point].kind !== 'end') {
      const xx = x(T.points[view.point].time_ns);
      svg.insertBefore(s('line', { class: 'point-line', x1: xx, x2: xx, y1: TOP, y2: H - BOTTOM }), overlay);
    }
    const toNs = (evt) => {
      const r = svg.getBoundingClientRect();
      const px = (evt.clientX - r.left) * (W / r.width);
      return Math.min(END_NS, Math.max(0, ((px - ML) / plotW) * END_NS));
    };
    tlGeom.toNs = toNs;
    overlay.addEventListener('mousedown', (evt) => { drag = { t0: toNs(evt), x0: evt.clientX }; evt.preventDefault(); });
    overlay.addEventListener('mousemove', (evt) => {
      const t = toNs(evt);
      cursor.setAttribute('x1', x(t));
      cursor.setAttribute('x2', x(t));
      if (drag) {
        const a = Math.min(drag.t0, t), b = Math.max(drag.t0, t);
        sel.setAttribute('x', x(a));
        sel.setAttribute('width', Math.max(1, x(b) - x(a)));
        sel.setAttribute('visibility', 'visible');
      }
      showTip(evt, timelineTip(t));
    });
    overlay.addEventListener('mouseleave', () => { cursor.setAttribute('x1', -10); cursor.setAttribute('x2', -10); hideTip(); });
    box.append(svg);
  }

  function drawLane(svg, lane, x) {
    const { sr, d, y, h: hgt, max } = lane;
    const g = s('g', { class: 'lane', 'data-domain': sr.domain });
    const yv = (v) => y + hgt - (v / max) * hgt;
    g.append(s('rect', { class: 'lane-bg', x: tlGeom.ML, y, width: tlGeom.plotW, height: hgt }));
    for (const v of niceTicks(max / 1.08, 3)) {
      if (v <= 0) continue;
      g.append(s('line', { class: 'grid', x1: tlGeom.ML, x2: tlGeom.ML + tlGeom.plotW, y1: yv(v), y2: yv(v) }));
      g.append(s('text', { class: 'ytick', x: tlGeom.ML - 6, y: yv(v) + 4, 'text-anchor': 'end' }, bytes(v)));
    }
    const capNote = d.ref.capacity && d.ref.capacity > max ? ' · capacity ' + bytes(d.ref.capacity) + ', peak at ' + pct(d.sum.peak.bytes / d.ref.capacity) + ' of it' : '';
    g.append(s('text', { class: 'lane-title', x: tlGeom.ML + 6, y: y + 14 }, sr.name + (d.ref.kind !== 'heap' ? ' (' + d.ref.kind + ')' : ''), s('tspan', { class: 'capacity-text', dx: 4 }, capNote)));
    const E = TL.edges_ns;
    const n = sr.last.length;
    if (!view.hidden.has('d' + sr.domain)) {
      // Envelope: low..high per bucket, as steps.
      let top = '', bot = '';
      for (let i = 0; i < n; i++) {
        const xa = x(E[i]).toFixed(1), xb = x(E[i + 1]).toFixed(1);
        top += (i ? 'L' : 'M') + xa + ' ' + yv(sr.high[i]).toFixed(1) + 'L' + xb + ' ' + yv(sr.high[i]).toFixed(1);
        bot = 'L' + xb + ' ' + yv(sr.low[i]).toFixed(1) + 'L' + xa + ' ' + yv(sr.low[i]).toFixed(1) + bot;
      }
      g.append(s('path', { class: 'series-env', d: top + bot + 'Z', fill: d.color }));
      // The value at each bucket's end, held across the bucket.
      let line = '';
      for (let i = 0; i < n; i++) {
        const yy = yv(sr.last[i]).toFixed(1);
        line += (i ? 'L' : 'M') + x(E[i]).toFixed(1) + ' ' + yy + 'L' + x(E[i + 1]).toFixed(1) + ' ' + yy;
      }
      g.append(s('path', { class: 'series-line', d: line, stroke: d.color, 'data-domain': sr.domain }));
    }
    if (lane.withProcess) {
      const P = TL.process;
      for (const [key, vals, color] of [['resident', P.resident, '#444b5a'], ['committed', P.committed, '#9aa3b5']]) {
        if (view.hidden.has(key) || !vals.some((v) => v > 0)) continue;
        let p = '';
        vals.forEach((v, i) => { p += (i ? 'L' : 'M') + x(P.time_ns[i]).toFixed(1) + ' ' + yv(v).toFixed(1); });
        g.append(s('path', { class: 'process-line', d: p, stroke: color, 'data-kind': key }));
      }
    }
    if (lane.budget) {
      // The driver's budget and usage: each sample held until the next, the last to the end.
      const B = lane.budget;
      for (const [key, vals, kind] of [['b', B.budget, 'budget'], ['u', B.usage, 'usage']]) {
        if (view.hidden.has(key + sr.domain)) continue;
        let p = '';
        vals.forEach((v, i) => {
          const xx = x(B.time_ns[i]).toFixed(1), yy = yv(v).toFixed(1);
          p += i ? 'H' + xx + 'V' + yy : 'M' + xx + ' ' + yy;
        });
        p += 'H' + x(END_NS).toFixed(1);
        g.append(s('path', { class: 'budget-line ' + kind, d: p, stroke: d.color, 'data-kind': kind, 'data-domain': sr.domain }));
      }
    }
    const cap = d.ref.capacity;
    if (cap) {
      if (cap <= max) {
        g.append(s('line', { class: 'capacity-line', x1: tlGeom.ML, x2: tlGeom.ML + tlGeom.plotW, y1: yv(cap), y2: yv(cap) }));
        g.append(s('text', { class: 'capacity-text', x: tlGeom.ML + tlGeom.plotW - 4, y: yv(cap) + 12, 'text-anchor': 'end' }, 'capacity ' + bytes(cap)));
      }
    }
    const pk = d.sum.peak;
    if (pk.count > 0 && !view.hidden.has('d' + sr.domain)) {
      const px = x(pk.time_ns), py = yv(pk.bytes);
      const m = s('g', { class: 'peak-marker', 'data-domain': sr.domain });
      m.append(s('path', { d: 'M' + px + ' ' + (py - 6) + 'l5 5l-5 5l-5 -5Z' }));
      const right = px < tlGeom.ML + tlGeom.plotW - 150;
      m.append(s('text', { x: px + (right ? 8 : -8), y: Math.max(y + 26, py + 3), 'text-anchor': right ? 'start' : 'end' }, 'peak ' + bytes(pk.bytes)));
      m.append(s('title', null, 'peak ' + bytes(pk.bytes) + ' in ' + plural(pk.count, 'allocation') + ' at ' + ms(pk.time_ns)));
      g.append(m);
    }
    svg.append(g);
  }

  function bucketAt(t) {
    return Math.max(0, Math.min(TL.edges_ns.length - 2, lowerBound(TL.edges_ns, t)));
  }
  function frameAt(t) {
    const k = lowerBound(TL.frames.time_ns, t);
    return k < 0 ? null : TL.frames.frame[k];
  }
  function timelineTip(t) {
    const b = bucketAt(t);
    const box = h('div');
    const fr = frameAt(t);
    box.append(h('div', null, h('b', null, ms(t)), fr != null ? ' · frame ' + fr + (TL.frames.stride > 1 ? ' (±' + TL.frames.stride + ')' : '') : ''));
    for (const lane of lanes) {
      const sr = lane.sr;
      const range = sr.low[b] !== sr.high[b] ? ' (' + bytes(sr.low[b]) + '–' + bytes(sr.high[b]) + ')' : '';
      box.append(h('div', { class: 't-row' }, h('span', null, h('span', { class: 'sw', style: 'background:' + lane.d.color }), sr.name), h('span', null, bytes(sr.last[b]) + range)));
      if (lane.budget) {
        const k = lowerBound(lane.budget.time_ns, t);
        if (k >= 0) box.append(h('div', { class: 't-row' }, h('span', null, 'driver budget / usage'), h('span', null, bytes(lane.budget.budget[k]) + ' / ' + bytes(lane.budget.usage[k]))));
      }
      if (lane.withProcess) {
        const k = lowerBound(TL.process.time_ns, t);
        if (k >= 0) {
          box.append(h('div', { class: 't-row' }, h('span', null, 'process resident'), h('span', null, bytes(TL.process.resident[k]))));
          if (TL.process.committed[k]) box.append(h('div', { class: 't-row' }, h('span', null, 'process committed'), h('span', null, bytes(TL.process.committed[k]))));
        }
      }
    }
    const li = lowerBound(TL.labels.map((l) => l.time_ns), t);
    if (li >= 0) box.append(h('div', { class: 'muted' }, 'after label "' + TL.labels[li].name + '"'));
    return box;
  }

  // ---------------------------------------------------------------- range selection
  const timePoints = () => T.points.map((p, i) => ({ p, i })).filter((x) => x.p.time_ns != null).sort((a, b) => a.p.time_ns - b.p.time_ns);
  function lastPointAtOrBefore(t) {
    let best = -1;
    for (const { p, i } of timePoints()) if (p.time_ns <= t) best = i;
    return best;
  }
  function setRange(t0, t1) {
    view.range = { t0, t1 };
    let p = lastPointAtOrBefore(t1);
    view.after = p < 0;
    if (p < 0) p = timePoints().find(({ p: q }) => q.time_ns > t1).i; // the end at the latest
    view.point = p;
    view.base = lastPointAtOrBefore(t0);
    syncRangeSelects();
    renderAll();
  }
  function clearRange(render) {
    view.range = null;
    view.base = null;
    syncRangeSelects();
    if (render !== false) renderAll();
  }
  function rangeOptions() {
    const opts = [{ v: 'start', t: 0, text: 'start (0 ms)' }];
    TL.labels.forEach((l, i) => opts.push({ v: 'l' + i, t: l.time_ns, text: '"' + l.name + '" (' + ms(l.time_ns) + ')' }));
    opts.push({ v: 'end', t: END_NS, text: 'end (' + ms(END_NS) + ')' });
    return opts;
  }
  function syncRangeSelects() {
    const opts = rangeOptions();
    for (const [id, which] of [['range-from', 't0'], ['range-to', 't1']]) {
      const sel = $(id);
      sel.replaceChildren(h('option', { value: '' }, which === 't0' ? '—' : '—'));
      let chosen = '';
      for (const o of opts) {
        sel.append(h('option', { value: o.v }, o.text));
        if (view.range && Math.abs(o.t - view.range[which]) < 1) chosen = o.v;
      }
      if (view.range && !chosen) {
        sel.append(h('option', { value: 'custom' }, ms(view.range[which])));
        chosen = 'custom';
      }
      sel.value = chosen;
    }
  }
  function onRangeSelect() {
    const opts = rangeOptions();
    const get = (id) => opts.find((o) => o.v === $(id).value);
    const a = get('range-from'), b = get('range-to');
    if (a && b) setRange(Math.min(a.t, b.t), Math.max(a.t, b.t));
  }

  function seriesValue(sr, t) { return sr.last[bucketAt(t)]; }
  function renderRangeInfo() {
    const box = $('range-info');
    if (!view.range) { box.hidden = true; box.replaceChildren(); return; }
    box.hidden = false;
    const { t0, t1 } = view.range;
    const b0 = bucketAt(t0), b1 = bucketAt(t1);
    const rows = [];
    const rowOf = (sr) => {
      let hi = 0;
      for (let k = b0; k <= b1; k++) hi = Math.max(hi, sr.high[k]);
      const a = seriesValue(sr, t0), b = seriesValue(sr, t1);
      return { name: sr.name, a, b, hi, delta: b - a };
    };
    for (const sr of TL.domains) rows.push(rowOf(sr));
    const ctx = TL.contexts.map((sr) => Object.assign(rowOf(sr), { domain: DOMAINS[sr.domain].ref.name }))
      .sort((p, q) => Math.abs(q.delta) - Math.abs(p.delta)).slice(0, 10);
    const table = (title, list, withDomain) => h('table', { class: 'data' },
      h('thead', null, h('tr', null, h('th', { class: 'l' }, title), withDomain ? h('th', { class: 'l' }, 'domain') : null, h('th', null, 'at ' + ms(t0)), h('th', null, 'at ' + ms(t1)), h('th', null, 'change'), h('th', null, 'highest in range'))),
      h('tbody', null, list.map((r) => h('tr', null, h('td', { class: 'l' }, r.name), withDomain ? h('td', { class: 'l' }, r.domain) : null, h('td', null, bytes(r.a)), h('td', null, bytes(r.b)),
        h('td', { class: r.delta > 0 ? 'pos' : (r.delta < 0 ? 'neg' : 'zero') }, signedBytes(r.delta)), h('td', null, bytes(r.hi))))));
    box.replaceChildren(
      h('div', null, h('b', null, 'Range ' + ms(t0) + ' → ' + ms(t1)), ' (' + ms(t1 - t0) + '): live bytes at the ends of the range and the highest value in it, from the timeline buckets (' + ms(TL.edges_ns[1] - TL.edges_ns[0]) + ' wide).'),
      table('domain', rows, false),
      ctx.length ? table('top-level context (largest change)', ctx, true) : null,
    );
  }

  // ---------------------------------------------------------------- point selector and note
  function renderPointSelect() {
    const sel = $('point');
    sel.replaceChildren();
    T.points.forEach((p, i) => sel.append(h('option', { value: i }, p.kind === 'label' ? 'at label "' + p.name + '" (' + ms(p.time_ns) + ')' : (p.kind === 'end' ? 'at the end' : (p.kind === 'peak' ? "at each domain's peak" : 'at the start of ' + p.name)))));
    sel.value = String(view.point);
    const tm = $('tm-domain');
    tm.replaceChildren();
    for (const d of DOMAINS) if (d.sum.total.count || d.sum.peak.count) tm.append(h('option', { value: d.i }, d.ref.name));
    tm.value = String(view.tmDomain);
  }
  function renderNote() {
    const note = $('view-note');
    let text = 'Figures ' + (T.points[view.point].kind === 'peak' ? "at each domain's own peak" : 'at ' + pointName(view.point)) + '.';
    if (view.range) {
      text = 'Range ' + ms(view.range.t0) + ' → ' + ms(view.range.t1) + ': the context tree is known at labels and at the end, so the treemap and table show it at ' + pointName(view.point) +
        (view.after ? ', the first such point after the range (none is at or before its end)' : ', the last such point at or before the range end') +
        '; the Δ column is the change since ' + pointName(view.base) + (view.base === view.point ? ' (no label inside the range: no change can be told)' : '') + '.';
    }
    if (T.elided_contexts > 0) text += ' The tree is cut to ' + count(T.max_nodes) + ' nodes: ' + count(T.elided_contexts) + ' of ' + count(T.contexts) + ' contexts are folded into "… more contexts" rows that keep the totals.';
    note.textContent = text;
  }
  function setPoint(p) {
    view.point = p;
    $('point').value = String(p);
    renderAll();
  }

  // ---------------------------------------------------------------- treemap
  function squarify(items, x0, y0, w, hgt) {
    // items: [{v, ...}] sorted desc, v > 0. Returns [{item, x, y, w, h}].
    const out = [];
    let total = items.reduce((a, b) => a + b.v, 0);
    let i = 0;
    while (i < items.length && w > 0 && hgt > 0) {
      const short = Math.min(w, hgt);
      const scale = (w * hgt) / total;
      let row = [items[i]], rowSum = items[i].v, best = worst(row, rowSum, short, scale);
      let j = i + 1;
      while (j < items.length) {
        const next = worst(row.concat([items[j]]), rowSum + items[j].v, short, scale);
        if (next > best) break;
        row.push(items[j]); rowSum += items[j].v; best = next; j++;
      }
      const thick = (rowSum * scale) / short;
      let off = 0;
      for (const it of row) {
        const len = (it.v * scale) / thick;
        if (w >= hgt) out.push({ item: it, x: x0, y: y0 + off, w: thick, h: len });
        else out.push({ item: it, x: x0 + off, y: y0, w: len, h: thick });
        off += len;
      }
      if (w >= hgt) { x0 += thick; w -= thick; } else { y0 += thick; hgt -= thick; }
      total -= rowSum;
      i = j;
    }
    for (; i < items.length; i++) out.push({ item: items[i], x: x0, y: y0, w: 0, h: 0 });
    return out;
  }
  function worst(row, sum, short, scale) {
    const s2 = sum * scale, side2 = short * short;
    let mx = 0, mn = Infinity;
    for (const r of row) { const a = r.v * scale; mx = Math.max(mx, a); mn = Math.min(mn, a); }
    return Math.max((side2 * mx) / (s2 * s2 / 1), (s2 * s2) / (side2 * mn));
  }

  function renderTreemap() {
    const box = $('treemap');
    box.replaceChildren();
    const d = view.tmDomain;
    const f = at(d, view.point);
    const val = f.bytes;
    let root = view.tmRoot;
    if (!(val[root] > 0)) { while (root > 0 && !(val[root] > 0)) root = T.nodes.parent[root]; view.tmRoot = root; }
    renderBreadcrumb(root);
    const W = Math.max(300, box.clientWidth || 900), H = Math.max(200, box.clientHeight || 440);
    if (!(val[root] > 0)) {
      box.append(h('div', { class: 'empty' }, 'Nothing live in ' + DOMAINS[d].ref.name + ' ' + (T.points[view.point].kind === 'peak' ? 'at its peak' : 'at ' + pointName(view.point))));
      renderTypeLegend([]);
      return;
    }
    const svg = s('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': 'treemap' });
    const defs = s('defs');
    const pat = s('pattern', { id: 'tm-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
    pat.append(s('rect', { width: 6, height: 6, fill: '#d5d9e0' }), s('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#bcc2cc', 'stroke-width': 3 }));
    defs.append(pat);
    svg.append(defs);
    const types = new Set();
    const layer = s('g');
    svg.append(layer);
    const drawChildren = (node, x0, y0, w, hgt) => {
      const items = kids[node].filter((c) => val[c] > 0).map((c) => ({ v: val[c], node: c })).sort((a, b) => b.v - a.v);
      const own = val[node] - items.reduce((a, b) => a + b.v, 0);
      if (own > 0) items.push({ v: own, node: -1 });
      items.sort((a, b) => b.v - a.v);
      for (const r of squarify(items, x0, y0, w, hgt)) {
        if (r.item.node >= 0) { drawNode(r.item.node, r.x, r.y, r.w, r.h); continue; }
        // The context's own allocations (the root's: outside any context).
        if (r.w < 2 || r.h < 2) continue;
        const own = s('rect', { class: 'tm-own', x: r.x.toFixed(1), y: r.y.toFixed(1), width: r.w.toFixed(1), height: r.h.toFixed(1) });
        own.append(s('title', null, (node === 0 ? '(no context)' : fullName(node) + ': own allocations') + ', ' + bytes(r.item.v)));
        layer.append(own);
        if (r.w > 60 && r.h > 16) layer.append(s('text', { class: 'sub', x: r.x + 4, y: r.y + 12 }, (node === 0 ? '(no context) ' : 'own ') + bytes(r.item.v)));
      }
    };
    const drawNode = (node, x0, y0, w, hgt) => {
      const elided = T.nodes.elided[node] > 0;
      if (!elided) types.add(T.types[T.nodes.type[node]]);
      const rect = s('rect', { class: 'tm-node' + (elided ? ' elided' : ''), x: x0.toFixed(1), y: y0.toFixed(1), width: Math.max(0, w).toFixed(1), height: Math.max(0, hgt).toFixed(1), fill: elided ? 'url(#tm-hatch)' : typeColor(node), 'data-node': node });
      rect.addEventListener('mousemove', (evt) => showTip(evt, nodeTip(node, d)));
      rect.addEventListener('mouseleave', hideTip);
      rect.addEventListener('click', (evt) => {
        evt.stopPropagation();
        hideTip();
        if (kids[node].some((c) => val[c] > 0)) { view.tmRoot = node; renderTreemap(); }
        highlightRow(node);
      });
      rect.addEventListener('contextmenu', (evt) => { evt.preventDefault(); zoomOut(); });
      layer.append(rect);
      const label = w > 46 && hgt > 16;
      if (label) {
        const name = fullName(node);
        const maxChars = Math.floor((w - 8) / 6.2);
        layer.append(s('text', { x: x0 + 4, y: y0 + 12 }, name.length > maxChars ? name.slice(0, Math.max(1, maxChars - 1)) + '…' : name));
        if (hgt > 30 && w > 70 && !kids[node].some((c) => val[c] > 0)) layer.append(s('text', { class: 'sub', x: x0 + 4, y: y0 + 25 }, bytes(val[node])));
      }
      const pad = label ? 16 : 2;
      drawChildren(node, x0 + 2, y0 + pad, Math.max(0, w - 4), Math.max(0, hgt - pad - 2));
    };
    drawChildren(root, 0, 0, W, H);
    svg.addEventListener('contextmenu', (evt) => { evt.preventDefault(); zoomOut(); });
    box.append(svg);
    renderTypeLegend([...types]);
  }
  function zoomOut() {
    if (view.tmRoot !== 0) { view.tmRoot = T.nodes.parent[view.tmRoot]; renderTreemap(); }
  }
  function renderBreadcrumb(root) {
    const nav = $('breadcrumb');
    nav.replaceChildren();
    const chain = [];
    for (let n = root; ; n = T.nodes.parent[n]) { chain.push(n); if (n === 0) break; }
    chain.reverse().forEach((n, k) => {
      if (k) nav.append(h('span', { class: 'sep' }, '›'));
      const name = n === 0 ? DOMAINS[view.tmDomain].ref.name + ' (all)' : fullName(n);
      if (n === root) nav.append(h('b', null, name));
      else nav.append(h('a', { onclick: () => { view.tmRoot = n; renderTreemap(); } }, name));
    });
    const f = at(view.tmDomain, view.point);
    nav.append(h('span', { class: 'muted' }, '  ' + bytes(f.bytes[root]) + ' in ' + plural(f.count[root], 'allocation') + (root ? ' · right-click to zoom out' : ' · click a context to zoom in')));
  }
  function renderTypeLegend(types) {
    const box = $('tm-legend');
    box.replaceChildren();
    for (const ty of types.sort()) box.append(h('span', { class: 'item' }, h('span', { class: 'sw', style: 'background:hsl(' + hashHue(ty) + ',55%,62%)' }), ty || '(none)'));
  }
  function nodeTip(node, d) {
    const f = at(d, view.point);
    const box = h('div');
    box.append(h('div', null, h('b', null, path(node))));
    box.append(h('div', { class: 't-row' }, h('span', null, DOMAINS[d].ref.name + ', with sub-contexts'), h('span', null, bytes(f.bytes[node]) + ' in ' + count(f.count[node]))));
    box.append(h('div', { class: 't-row' }, h('span', null, 'own'), h('span', null, bytes(f.ownBytes[node]) + ' in ' + count(f.ownCount[node]))));
    if (T.nodes.instances[node]) box.append(h('div', { class: 't-row' }, h('span', null, 'instances'), h('span', null, count(T.nodes.instances[node]) + ' · ' + bytes(f.bytes[node] / T.nodes.instances[node]) + ' each')));
    if (T.nodes.elided[node]) box.append(h('div', { class: 'muted' }, 'contexts folded to keep the page small (--max-nodes)'));
    return box;
  }

  // ---------------------------------------------------------------- table
  function columns() {
    const cols = [];
    GROUPS.forEach((g, gi) => {
      cols.push({ key: 'g' + gi + '_own', group: gi, head: 'own bytes', get: (r) => r.g[gi].ownBytes, fmt: bytes, first: true });
      cols.push({ key: 'g' + gi + '_ownc', group: gi, head: 'own #', get: (r) => r.g[gi].ownCount, fmt: count });
      cols.push({ key: 'g' + gi + '_bytes', group: gi, head: 'total bytes', get: (r) => r.g[gi].bytes, fmt: bytes });
      cols.push({ key: 'g' + gi + '_count', group: gi, head: 'total #', get: (r) => r.g[gi].count, fmt: count });
    });
    cols.push({ key: 'inst', head: 'instances', get: (r) => r.instances, fmt: (v) => v ? count(v) : '', first: true, title: 'entries flagged as instances, over the recording' });
    cols.push({ key: 'avg', head: 'per instance', get: (r) => r.instances ? r.all / r.instances : null, fmt: (v) => v == null ? '' : bytes(Math.round(v)), title: 'total bytes (every column group) / instances' });
    cols.push({ key: 'eff', head: 'efficiency', get: (r) => r.cap ? r.used / r.cap : null, fmt: (v) => v == null ? '' : pct(v), title: 'used / capacity of the containers that report their usage, with sub-contexts' });
    cols.push({ key: 'alloc', head: 'allocated in all', get: (r) => r.allocated, fmt: bytes, title: 'bytes allocated over the whole recording, with sub-contexts' });
    if (view.base != null) cols.push({ key: 'delta', head: 'Δ since ' + (view.base < 0 ? 'start' : T.points[view.base].name), get: (r) => r.delta, fmt: (v) => v ? signedBytes(v) : '0', cls: (v) => v > 0 ? 'pos' : (v < 0 ? 'neg' : 'zero'), title: 'change of total bytes since ' + pointName(view.base) });
    return cols;
  }
  function rowData() {
    const p = view.point;
    const rows = new Array(N);
    const figs = GROUPS.map((g) => g.domains.map((d) => at(d, p)));
    const base = view.base != null ? GROUPS.map((g) => g.domains.map((d) => at(d, view.base))) : null;
    const allocs = TOP_DOMAINS.map((d) => allocated(d));
    const u = usage(p);
    for (let i = 0; i < N; i++) {
      const g = figs.map((fl) => {
        const o = { ownBytes: 0, ownCount: 0, bytes: 0, count: 0 };
        for (const f of fl) { o.ownBytes += f.ownBytes[i]; o.ownCount += f.ownCount[i]; o.bytes += f.bytes[i]; o.count += f.count[i]; }
        return o;
      });
      const all = g.reduce((a, b) => a + b.bytes, 0);
      let allocated2 = 0, allocCount = 0;
      for (const a of allocs) { allocated2 += a.bytes[i]; allocCount += a.count[i]; }
      let delta = 0;
      if (base) delta = all - base.reduce((a, fl) => a + fl.reduce((b, f) => b + f.bytes[i], 0), 0);
      const live = g.reduce((a, b) => a + b.count, 0);
      const baseLive = base ? base.reduce((a, fl) => a + fl.reduce((b, f) => b + f.count[i], 0), 0) : 0;
      rows[i] = { i, g, all, live, allocated: allocated2, allocCount, instances: T.nodes.instances[i], used: u.bytes[i], cap: u.count[i], delta, baseLive };
    }
    return rows;
  }
  // A row is shown when it holds something at the point (or at the Δ base), or, at the
  // end, allocated anything over the recording.
  function rowShown(r) {
    if (r.i === 0) return true;
    return r.live > 0 || r.baseLive > 0 || (T.points[view.point].kind === 'end' && r.allocCount > 0);
  }
  let tableRows = null;
  function renderTable() {
    const table = $('tree-table');
    const cols = columns();
    if (view.sort.key !== 'name' && !cols.some((c) => c.key === view.sort.key)) view.sort = { key: 'g0_bytes', dir: -1 };
    const thead = table.tHead;
    thead.replaceChildren();
    const r1 = h('tr', null, h('th', { class: 'l', rowspan: 2 }, ''));
    GROUPS.forEach((g) => r1.append(h('th', { class: 'group', colspan: 4 }, g.name)));
    r1.append(h('th', { class: 'group', colspan: cols.length - 4 * GROUPS.length }, 'all domains'));
    const r2 = h('tr');
    const sortTh = (key, text, cls, title) => {
      const th = h('th', { class: 'sortable ' + (cls || '') + (view.sort.key === key ? ' sorted' + (view.sort.dir > 0 ? ' asc' : '') : ''), 'data-sort': key, title: title || 'sort' }, text);
      th.addEventListener('click', () => {
        view.sort = view.sort.key === key ? { key, dir: -view.sort.dir } : { key, dir: key === 'name' ? 1 : -1 };
        renderTable();
      });
      return th;
    };
    r1.firstChild.replaceWith(sortTh('name', 'context', 'l', 'sort by name'));
    r1.firstChild.setAttribute('rowspan', 2);
    for (const c of cols) r2.append(sortTh(c.key, c.head, c.first ? 'gs' : '', c.title));
    thead.append(r1, r2);

    const rows = rowData();
    tableRows = rows;
    const col = cols.find((c) => c.key === view.sort.key);
    const key = col ? col.get : null;
    const cmp = (a, b) => {
      if (T.nodes.elided[a] !== T.nodes.elided[b]) return T.nodes.elided[a] ? 1 : -1; // elided rows last
      if (!key) return view.sort.dir * fullName(a).localeCompare(fullName(b));
      const va = key(rows[a]) ?? -Infinity, vb = key(rows[b]) ?? -Infinity;
      return va === vb ? fullName(a).localeCompare(fullName(b)) : (va < vb ? -view.sort.dir : view.sort.dir);
    };
    // With a filter: matches, their ancestors (expanded), nothing else.
    let keep = null, matches = 0;
    if (view.filter) {
      keep = new Uint8Array(N);
      for (let i = 1; i < N; i++) {
        if (rowShown(rows[i]) && view.filter(fullName(i))) {
          matches++;
          keep[i] = 2;
          for (let p = T.nodes.parent[i]; keep[p] === 0; p = T.nodes.parent[p]) { keep[p] = 1; if (p === 0) break; }
          keep[0] = keep[0] || 1;
        }
      }
    }
    const body = document.createElement('tbody');
    const LIMIT = 3000;
    let emitted = 0, skipped = 0;
    const walk = (i) => {
      if (keep && !keep[i]) return;
      if (!rowShown(rows[i])) return;
      if (emitted >= LIMIT) { skipped++; return; }
      const children = kids[i].filter((c) => rowShown(rows[c]) && (!keep || keep[c]));
      const open = keep ? true : view.expanded.has(i);
      body.append(tableRow(i, rows[i], cols, children.length > 0, open, keep && keep[i] === 2));
      emitted++;
      if (open) children.sort(cmp).forEach(walk);
    };
    walk(0);
    table.replaceChild(body, table.tBodies[0]);
    const foot = $('table-foot');
    foot.textContent = (skipped ? skipped + ' more rows not drawn: filter or collapse. ' : '') +
      'own: the context\'s own allocations; total: with its sub-contexts. ' + (T.points[view.point].kind === 'peak' ? 'Each column group at each domain\'s own peak.' : '');
    const msg = $('filter-msg');
    if (view.filter) { msg.className = 'filter-msg'; msg.textContent = matches + ' matching ' + (matches === 1 ? 'context' : 'contexts'); }
    else if (!msg.classList.contains('error')) msg.textContent = '';
  }
  function tableRow(i, r, cols, hasKids, open, isMatch) {
    const tr = h('tr', { 'data-node': i, class: (T.nodes.elided[i] ? 'elided ' : '') + (isMatch ? 'match ' : '') + (i === view.highlight ? 'hl' : '') });
    const ind = h('span', { style: 'display:inline-block;width:' + depth[i] * 16 + 'px' });
    const tw = h('span', { class: 'tw' }, hasKids ? (open ? '▾' : '▸') : '');
    if (hasKids && !view.filter) tw.addEventListener('click', () => { if (view.expanded.has(i)) view.expanded.delete(i); else view.expanded.add(i); renderTable(); });
    const name = i === 0 ? h('span', { class: 'nm' }, 'all (' + (S.selection.thread ? 'thread ' + (S.selection.thread.name || S.selection.thread.stream) : 'every thread') + ')')
      : T.nodes.elided[i] ? h('span', { class: 'nm' }, '… ' + T.nodes.name[i])
        : h('span', null, h('span', { class: 'sw', style: 'background:' + typeColor(i) }), h('span', { class: 'ty' }, T.types[T.nodes.type[i]] + ':'), h('span', { class: 'nm' }, T.nodes.name[i]));
    tr.append(h('td', { class: 'l name', title: path(i) }, ind, tw, name));
    for (const c of cols) {
      const v = c.get(r);
      const cls = (c.first ? 'gs ' : '') + (c.cls ? c.cls(v) : (!v ? 'zero' : ''));
      tr.append(h('td', { class: cls }, c.fmt(v)));
    }
    return tr;
  }
  function highlightRow(node) {
    view.highlight = node;
    for (let p = T.nodes.parent[node]; ; p = T.nodes.parent[p]) { view.expanded.add(p); if (p <= 0) break; }
    renderTable();
    const tr = document.querySelector('#tree-table tr[data-node="' + node + '"]');
    if (tr && tr.scrollIntoView) tr.scrollIntoView({ block: 'nearest' });
  }
  function onFilter() {
    const text = $('filter').value;
    const msg = $('filter-msg');
    msg.className = 'filter-msg';
    msg.textContent = '';
    if (!text) { view.filter = null; renderTable(); return; }
    if ($('regex').checked) {
      let re;
      try { re = new RegExp(text, 'i'); } catch (e) {
        msg.className = 'filter-msg error';
        msg.textContent = 'invalid regular expression: ' + e.message;
        return; // keep the rows as they are
      }
      view.filter = (name) => re.test(name);
    } else {
      const low = text.toLowerCase();
      view.filter = (name) => name.toLowerCase().includes(low);
    }
    renderTable();
  }

  // ---------------------------------------------------------------- leaks, sites, details
  // Callstacks: a site is `{function, file, line, frames, site_frame, trimmed}` (JSON.md,
  // "site"); the raw return addresses stay in the rows' `frames`. The island stores each
  // frame once (JSON.md, `report`): a site's `frames` are indices in `frames_table` (its
  // columns, strings in `strings`), a row's raw `frames` indices in `addresses_table`;
  // `frameAt` and `addressesOf` resolve them when a stack is shown. A row shows the
  // allocating function and where in it; its toggle opens the whole stack below it, built
  // on first use.
  const FT = D.frames_table, ADDRESSES = D.addresses_table;
  function tableString(k) { return k < 0 ? null : FT.strings[k]; }
  function frameAt(i) {
    const address = ADDRESSES[FT.address[i]];
    return {
      address, module: tableString(FT.module[i]), offset: FT.offset[i] ?? address,
      function: tableString(FT.function[i]), file: tableString(FT.file[i]), line: FT.line[i],
      inlined: FT.inlined[i] === 1, resolution: tableString(FT.resolution[i]), reason: tableString(FT.reason[i]),
    };
  }
  function addressesOf(raw) { return raw ? raw.map((i) => ADDRESSES[i]) : raw; }
  const REASONS = { 'symbolication-off': 'symbolication off', 'no-module': 'in no recorded module', 'binary-not-found': 'binary not found', 'build-id-mismatch': 'build id mismatch', 'unreadable-binary': 'unreadable binary', 'too-many-open-files': 'too many open files', 'no-symbols': 'no symbols', 'no-debug-info': 'no line info' };
  function shortPath(p) {
    let m = /^\/rustc\/[^/]+\/(library\/.*)$/.exec(p);
    if (m) return m[1];
    m = /\/registry\/src\/[^/]+\/(.*)$/.exec(p);
    if (m) return m[1];
    const parts = p.split(/[\\/]/).filter((x) => x);
    return parts.length > 3 ? '…/' + parts.slice(-3).join('/') : p;
  }
  function location(file, line) { return file ? shortPath(file) + (line != null ? ':' + line : '') : null; }
  function baseName(p) { return p.split(/[\\/]/).pop(); }
  function frameName(f) { return f.function || (f.module ? f.module + '+' + f.offset : f.address); }
  function siteCell(site, stack, raw, cols) {
    const td = h('td', { class: 'l site' });
    const name = site ? site.function : (stack ? 'stack ' + stack : '(no callstack)');
    const has = site ? site.frames.length > 0 : raw && raw.length > 0;
    if (has) {
      const btn = h('button', { type: 'button', class: 'stack-toggle', 'aria-expanded': 'false', 'aria-label': 'callstack of ' + name, title: 'Show the callstack' + (stack ? ' (stack ' + stack + ')' : '') }, '▸');
      btn.addEventListener('click', () => toggleStack(btn, site, raw, cols));
      td.append(btn);
    } else td.append(h('span', { class: 'stack-toggle none' }));
    td.append(h('span', { class: 'fn', title: name }, name));
    const where = site && location(site.file, site.line);
    if (where) td.append(h('span', { class: 'loc', title: site.file + (site.line != null ? ':' + site.line : '') }, where));
    return td;
  }
  function toggleStack(btn, site, raw, cols) {
    const tr = btn.closest('tr');
    let next = tr.nextElementSibling;
    if (next && next.classList.contains('stack-row')) next.hidden = !next.hidden;
    else {
      next = h('tr', { class: 'stack-row' }, h('td', { class: 'l', colspan: cols }, stackView(site, raw)));
      tr.after(next);
    }
    const open = !next.hidden;
    btn.setAttribute('aria-expanded', String(open));
    btn.textContent = open ? '▾' : '▸';
    tr.classList.toggle('open', open);
  }
  function stackView(site, rawIndices) {
    const raw = addressesOf(rawIndices);
    const addrs = raw && raw.length ? 'return addresses: ' + raw.join(' ') : 'no return addresses';
    if (!site) return h('div', { class: 'stack-view' }, h('ol', { class: 'stack' }, raw.map((a) => h('li', null, h('span', { class: 'fn' }, a)))), h('div', { class: 'stack-note' }, 'not symbolicated'));
    const items = site.frames.map(frameAt).map((f, i) => h('li', { class: (i === site.site_frame ? 'site-frame' : '') + (f.inlined ? ' inlined' : '') },
      h('span', { class: 'fn', title: frameName(f) }, frameName(f)),
      f.inlined ? h('span', { class: 'tag', title: 'inlined into the next frame' }, 'inlined') : null,
      f.file ? h('span', { class: 'loc', title: f.file + (f.line != null ? ':' + f.line : '') }, location(f.file, f.line)) : null,
      h('span', { class: 'addr' }, f.module ? f.module + '+' + f.offset : f.address)));
    const note = ['innermost first', 'the allocating function highlighted'];
    if (site.trimmed) note.push(plural(site.trimmed, 'recorder or allocator frame') + ' trimmed from the top');
    return h('div', { class: 'stack-view' }, h('ol', { class: 'stack' }, items), h('div', { class: 'stack-note' }, note.join(' · ') + ' · ' + addrs));
  }
  function linesText(lines) {
    const byFile = new Map();
    for (const l of lines) { if (!byFile.has(l.file)) byFile.set(l.file, []); byFile.get(l.file).push(l.line); }
    return [...byFile].map(([f, ls]) => shortPath(f) + ':' + ls.join(',')).join(' ');
  }
  function symbolsLine(st) {
    const resolved = st.with_lines + st.function_only;
    let t = count(resolved) + ' of ' + count(st.addresses) + (st.addresses === 1 ? ' address' : ' addresses') + ' resolved (' + count(st.with_lines) + ' with file and line); ' + count(st.unresolved) + ' unresolved.';
    if (st.reasons.length) t += ' Why: ' + st.reasons.map((r) => (REASONS[r.reason] || r.reason) + (r.module ? ': ' + baseName(r.module) : '') + ' (' + count(r.addresses) + ')').join(', ') + '.';
    return t;
  }
  function simpleTable(heads, rows, cls) {
    return h('table', { class: 'data' + (cls ? ' ' + cls : '') }, h('thead', null, h('tr', null, heads.map((x) => h('th', { class: x.l ? 'l' : '' }, x.t)))), h('tbody', null, rows));
  }
  function renderLeaks() {
    const L = D.leaks, box = $('leaks');
    if (!L.domains.length) { box.append(h('p', { class: 'muted' }, 'Nothing live at the end: nothing leaked.')); return; }
    box.append(h('p', null, bytes(L.total_bytes) + ' in ' + plural(L.total_count, 'allocation') + ' live at the end (top-level domains), by context, then by allocation site.'));
    for (const d of L.domains) {
      const rows = [];
      for (const c of d.contexts) {
        rows.push(h('tr', { class: 'ctx' }, h('td', null, bytes(c.bytes)), h('td', null, count(c.count)), h('td', { class: 'l' }, h('b', null, c.context))));
        for (const st of c.sites) {
          const tr = h('tr', { class: 'sub', 'data-stack': st.stack }, h('td', null, bytes(st.bytes)), h('td', null, count(st.count)), siteCell(st.site, st.stack, st.frames, 3));
          rows.push(tr);
        }
        if (c.hidden_sites) rows.push(h('tr', { class: 'sub' }, h('td'), h('td'), h('td', { class: 'l muted' }, '… ' + c.hidden_sites + ' more callstacks')));
      }
      if (d.hidden_contexts) rows.push(h('tr', null, h('td'), h('td'), h('td', { class: 'l muted' }, '… ' + d.hidden_contexts + ' more contexts')));
      box.append(h('h3', null, d.domain.name + ' · ' + bytes(d.bytes) + ' in ' + plural(d.count, 'allocation')));
      box.append(simpleTable([{ t: 'bytes' }, { t: 'count' }, { t: 'context / allocation site', l: 1 }], rows, 'stacks leaks-table'));
    }
  }
  function renderSites() {
    const box = $('sites');
    const fnRows = [];
    for (const d of D.top.domains) {
      for (const r of d.rows) {
        fnRows.push(h('tr', { 'data-key': r.key }, h('td', null, bytes(r.peak && r.peak.bytes)), h('td', null, bytes(r.live && r.live.bytes)), h('td', null, bytes(r.total && r.total.bytes)), h('td', null, count(r.total && r.total.count)),
          h('td', null, count(r.stacks.length)), h('td', { class: 'l' }, d.domain.name),
          h('td', { class: 'l site' }, h('span', { class: 'fn', title: r.key }, r.function), r.lines.length ? h('span', { class: 'loc', title: r.lines.map((l) => l.file + ':' + l.line).join('\n') }, linesText(r.lines)) : null)));
      }
      if (d.hidden_rows) fnRows.push(h('tr', null, h('td'), h('td'), h('td'), h('td'), h('td'), h('td', { class: 'l' }, d.domain.name), h('td', { class: 'l muted' }, '… ' + d.hidden_rows + ' more functions')));
    }
    box.append(h('h3', null, 'By allocating function ', h('span', { class: 'muted' }, 'largest at each domain\'s peak first')));
    if (fnRows.length) box.append(simpleTable([{ t: 'at peak' }, { t: 'live' }, { t: 'allocated' }, { t: 'allocations' }, { t: 'stacks' }, { t: 'domain', l: 1 }, { t: 'allocating function', l: 1 }], fnRows, 'functions-table'));
    else box.append(h('p', { class: 'muted' }, 'No allocation sites.'));
    box.append(h('h3', null, 'By callstack ', h('span', { class: 'muted' }, 'most bytes allocated over the recording first')));
    if (!S.sites.length) box.append(h('p', { class: 'muted' }, S.selection.thread ? 'Callstacks are not kept per thread.' : 'No allocation sites.'));
    else {
      const rows = S.sites.map((st) => h('tr', { 'data-stack': st.stack }, h('td', null, bytes(st.total.bytes)), h('td', null, count(st.total.count)), h('td', null, bytes(st.peak.bytes)), h('td', null, bytes(st.live.bytes)), h('td', null, count(st.temporaries)),
        h('td', { class: 'l' }, st.domain), siteCell(st.site, st.stack, st.frames, 7)));
      box.append(simpleTable([{ t: 'allocated' }, { t: 'count' }, { t: 'at peak' }, { t: 'at end' }, { t: 'temporaries' }, { t: 'domain', l: 1 }, { t: 'allocation site (expand for the callstack)', l: 1 }], rows, 'stacks sites-table'));
    }
    box.append(h('p', { id: 'symbols-line', class: 'symbols-line muted small' }, 'Symbols: ' + symbolsLine(D.symbols)));
  }
  function renderDetails() {
    const box = $('details');
    const dom = h('div', null, h('h3', null, 'Memory by domain (' + S.at + ')'), simpleTable(
      [{ t: 'domain', l: 1 }, { t: 'kind', l: 1 }, { t: 'capacity' }, { t: 'live' }, { t: 'peak' }, { t: 'peak at' }, { t: 'allocated' }, { t: 'count' }],
      S.domains.filter((d) => d.total.count || d.peak.count).map((d) => h('tr', null, h('td', { class: 'l' }, d.domain.name), h('td', { class: 'l' }, d.domain.kind + (d.domain.parent_name ? ' in ' + d.domain.parent_name : '')),
        h('td', null, d.domain.capacity ? bytes(d.domain.capacity) : '-'), h('td', null, bytes(d.live.bytes)), h('td', null, bytes(d.peak.bytes)), h('td', null, ms(d.peak.time_ns) + (d.peak.frame != null ? ', frame ' + d.peak.frame : '')),
        h('td', null, bytes(d.total.bytes)), h('td', null, count(d.total.count))))),
    h('p', { class: 'muted small' }, 'All top-level domains: ' + bytes(S.total.live.bytes) + ' live, ' + bytes(S.total.total.bytes) + ' allocated (' + S.total.domains.join(', ') + '; pools are inside heap blocks and not added again).'));
    box.append(dom);
    const pm = S.process_memory;
    if (pm) {
      box.append(h('div', null, h('h3', null, 'Process memory (what the OS saw)'), simpleTable([{ t: '', l: 1 }, { t: 'peak' }, { t: 'at' }, { t: 'at the end' }, { t: 'untracked at the end' }],
        [h('tr', null, h('td', { class: 'l' }, 'resident'), h('td', null, bytes(pm.resident.peak)), h('td', null, ms(pm.resident.peak_time_ns)), h('td', null, bytes(pm.resident.end)), h('td', null, bytes(pm.untracked_resident_end))),
          pm.committed ? h('tr', null, h('td', { class: 'l' }, 'committed'), h('td', null, bytes(pm.committed.peak)), h('td', null, ms(pm.committed.peak_time_ns)), h('td', null, bytes(pm.committed.end)), h('td', null, bytes(pm.untracked_committed_end))) : null]),
      h('p', { class: 'muted small' }, 'Tracked at the end: ' + bytes(pm.tracked_end) + ' (' + pm.tracked_domains.join(', ') + '). Untracked: code, static data, other allocators, allocator overhead, the recorder\'s buffers.')));
    }
    const inst = S.instances.flatMap((d) => d.types.map((t) => h('tr', null, h('td', { class: 'l' }, t.name), h('td', { class: 'l' }, d.domain), h('td', null, count(t.instances)), h('td', null, bytes(Math.round(t.bytes_per_instance || 0))), h('td', null, bytes(Math.round(t.peak_bytes_per_instance || 0))), h('td', null, bytes(Math.round(t.total_bytes_per_instance || 0))))));
    if (inst.length) box.append(h('div', null, h('h3', null, 'Bytes per instance'), simpleTable([{ t: 'type', l: 1 }, { t: 'domain', l: 1 }, { t: 'instances' }, { t: S.at.replace(/^at /, 'at ') }, { t: 'at peak' }, { t: 'allocated' }], inst)));
    const e = S.efficiency;
    const effRows = e.least_efficient_contexts.map((c) => h('tr', null, h('td', { class: 'l' }, c.context), h('td', null, pct(c.live.efficiency)), h('td', null, pct(c.peak.efficiency)), h('td', null, bytes(c.peak.wasted_bytes))));
    if (effRows.length) box.append(h('div', null, h('h3', null, 'Least efficient containers (by context)'), simpleTable([{ t: 'context', l: 1 }, { t: 'live' }, { t: 'at peak' }, { t: 'wasted at peak' }], effRows),
      h('p', { class: 'muted small' }, 'All reporting containers: ' + pct(e.live.efficiency) + ' used ' + S.at + ', ' + pct(e.peak.efficiency) + ' at the heap\'s peak.')));
    const tmp = S.temporaries.map((t) => h('tr', null, h('td', null, count(t.count)), h('td', null, bytes(t.bytes)), h('td', null, pct(t.share)), h('td', { class: 'l' }, t.domain), h('td', { class: 'l' }, t.context)));
    if (tmp.length) box.append(h('div', null, h('h3', null, 'Temporaries (freed before their thread allocated again)'), simpleTable([{ t: 'count' }, { t: 'bytes' }, { t: 'share' }, { t: 'domain', l: 1 }, { t: 'context', l: 1 }], tmp)));
    const labels = S.capture.labels.map((l) => h('tr', null, h('td', { class: 'l' }, l.name), h('td', null, ms(l.time_ns)), h('td', null, l.frame != null ? String(l.frame) : '-')));
    if (labels.length) box.append(h('div', null, h('h3', null, 'Labels'), simpleTable([{ t: 'label', l: 1 }, { t: 'time' }, { t: 'frame' }], labels.slice(0, 200)), labels.length > 200 ? h('p', { class: 'muted small' }, (labels.length - 200) + ' more labels') : null));
  }

  // ---------------------------------------------------------------- wiring
  function renderAll() {
    renderPointSelect();
    renderNote();
    renderTimeline();
    renderRangeInfo();
    renderTreemap();
    renderTable();
  }
  // Tables written by the analyzer into the page (the GPU section: table.sort-table): a
  // click on a header sorts the rows by that column, again to reverse. Numeric cells hold
  // their exact value in data-v; text columns (th.l) sort ascending first, numbers
  // descending.
  function sortTables() {
    for (const table of document.querySelectorAll('table.sort-table')) {
      if (!table.tHead || !table.tHead.rows.length || !table.tBodies.length) continue;
      const heads = Array.from(table.tHead.rows[0].cells);
      heads.forEach((th, col) => {
        th.classList.add('sortable');
        th.addEventListener('click', () => {
          const text = th.classList.contains('l');
          const desc = th.classList.contains('sorted') ? th.classList.contains('asc') : !text;
          for (const o of heads) o.classList.remove('sorted', 'asc');
          th.classList.add('sorted');
          if (!desc) th.classList.add('asc');
          const key = (tr) => {
            const td = tr.cells[col];
            if (!td) return text ? '' : -Infinity;
            return td.hasAttribute('data-v') ? Number(td.getAttribute('data-v')) : td.textContent;
          };
          const body = table.tBodies[0];
          const rows = Array.from(body.rows).map((tr, i) => ({ tr, i, k: key(tr) }));
          rows.sort((a, b) => {
            const d = typeof a.k === 'number' && typeof b.k === 'number' ? a.k - b.k : String(a.k).localeCompare(String(b.k));
            return (desc ? -d : d) || a.i - b.i;
          });
          for (const r of rows) body.append(r.tr);
        });
      });
    }
  }
  function init() {
    sortTables();
    renderHeader();
    renderCards();
    syncRangeSelects();
    renderAll();
    renderLeaks();
    renderSites();
    renderDetails();
    $('footer').textContent = D.generator + ' · ' + N + ' tree nodes (' + count(T.contexts) + ' contexts' + (T.elided_contexts ? ', ' + count(T.elided_contexts) + ' folded' : '') + ') · ' + (TL.edges_ns.length - 1) + ' time buckets of ' + ms(TL.edges_ns[1] - TL.edges_ns[0]) + ' · self-contained: this page loads nothing';
    $('point').addEventListener('change', (e) => { clearRange(false); setPoint(Number(e.target.value)); });
    $('tm-domain').addEventListener('change', (e) => { view.tmDomain = Number(e.target.value); view.tmRoot = 0; renderTreemap(); });
    $('range-from').addEventListener('change', onRangeSelect);
    $('range-to').addEventListener('change', onRangeSelect);
    $('range-clear').addEventListener('click', () => clearRange());
    $('cap-scale').addEventListener('change', (e) => { view.capScale = e.target.checked; renderTimeline(); });
    $('filter').addEventListener('input', onFilter);
    $('regex').addEventListener('change', onFilter);
    $('expand-all').addEventListener('click', () => { for (let i = 0; i < N; i++) if (kids[i].length) view.expanded.add(i); renderTable(); });
    $('collapse-all').addEventListener('click', () => { view.expanded = new Set([0]); renderTable(); });
    window.addEventListener('mouseup', endDrag);
    document.addEventListener('keydown', (e) => { if (e.key === 'Escape') { if (view.range) clearRange(); else zoomOut(); } });
    let resize = null;
    window.addEventListener('resize', () => { clearTimeout(resize); resize = setTimeout(() => { renderTimeline(); renderTreemap(); }, 150); });
  }

  try {
    init();
  } catch (err) {
    const f = $('fatal');
    f.hidden = false;
    f.textContent = 'The report could not be drawn: ' + err.message;
    throw err;
  }
  performance.mark('memreplay-rendered');
  window.memreplayRenderedMs = performance.now();
  document.documentElement.setAttribute('data-rendered', 'true');
})();
