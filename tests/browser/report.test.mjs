// Loads a `replay-cli report` page in Debian's Chromium (through playwright-core, which
// downloads no browser) and checks it the way a person would use it. Every expected
// count is derived here from the page's own data island, independently of the page's
// code. Run by tests/tests/all/html_report.rs:
//
//   node report.test.mjs check REPORT.html SCREENSHOT.png   (the checks, a screenshot)
//   node report.test.mjs measure REPORT.html                (load time only)
//
// Prints one JSON line of results on success; exits 1 with the reason otherwise.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [mode, htmlPath, shotPath] = process.argv.slice(2);
const executablePath = process.env.MEMREPLAY_CHROMIUM || '/usr/bin/chromium';
const results = {};

function fail(msg) {
  throw new Error(msg);
}
function eq(got, want, what) {
  if (JSON.stringify(got) !== JSON.stringify(want)) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

// ------------------------------------------------------------ the data island, read here
const html = readFileSync(htmlPath, 'utf8');
const open = '<script type="application/json" id="report-data">';
const start = html.indexOf(open) + open.length;
const D = JSON.parse(html.slice(start, html.indexOf('</script>', start)));
const T = D.tree;
// Callstacks are stored once (JSON.md, `report`): a site's `frames` index the columns of
// `frames_table`, a row's raw `frames` index `addresses_table`.
const FT = D.frames_table;
const tableString = (k) => (k < 0 ? null : FT.strings[k]);
const frameAt = (i) => ({
  address: D.addresses_table[FT.address[i]], module: tableString(FT.module[i]), offset: FT.offset[i] ?? D.addresses_table[FT.address[i]],
  function: tableString(FT.function[i]), file: tableString(FT.file[i]), line: FT.line[i], inlined: FT.inlined[i] === 1,
});
const addressesOf = (raw) => raw.map((i) => D.addresses_table[i]);
const N = T.nodes.parent.length;
const nameOf = (i) => (T.nodes.elided[i] ? '… ' + T.nodes.name[i] : T.types[T.nodes.type[i]] + ':' + T.nodes.name[i]);
function inclusive(triples, col) {
  const v = new Array(N).fill(0);
  for (let k = 0; k < triples.length; k += 3) v[triples[k]] += triples[k + col];
  for (let i = N - 1; i > 0; i--) v[T.nodes.parent[i]] += v[i];
  return v;
}
const sumOver = (domains, f) => {
  const out = new Array(N).fill(0);
  for (const d of domains) f(d).forEach((x, i) => (out[i] += x));
  return out;
};
// The table's domains: CPU and GPU ones (pools sit inside heap blocks), or all.
let tableDomains = D.domain_groups.map((g, i) => [g, i]).filter(([g]) => g !== 'pool').map(([, i]) => i);
if (!tableDomains.length) tableDomains = D.domain_groups.map((_, i) => i);
const cpuDomains = D.domain_groups.map((g, i) => [g, i]).filter(([g]) => g === 'cpu').map(([, i]) => i);
function shownAt(point) {
  const live = sumOver(tableDomains, (d) => inclusive(T.own[d][point], 2));
  const all = sumOver(tableDomains, (d) => inclusive(T.total[d], 2));
  const end = T.points[point].kind === 'end';
  return (i) => i === 0 || live[i] > 0 || (end && all[i] > 0);
}
const descendantsWithBytes = (domain, point, root) => {
  const v = inclusive(T.own[domain][point], 1);
  let n = 0;
  for (let i = 1; i < N; i++) {
    if (!(v[i] > 0)) continue;
    for (let p = T.nodes.parent[i]; ; p = T.nodes.parent[p]) {
      if (p === root) { n++; break; }
      if (p <= 0) break;
    }
  }
  return n;
};

// ------------------------------------------------------------ the browser
const browser = await chromium.launch({
  executablePath,
  headless: true,
  chromiumSandbox: false,
  args: ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let exitCode = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  const url = pathToFileURL(htmlPath).href;
  page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith('data:')) problems.push('request: ' + r.url()); });

  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('html[data-rendered="true"]', { timeout: 120000 });
  results.rendered_ms = await page.evaluate(() => Math.round(window.memreplayRenderedMs));
  results.html_bytes = html.length;
  results.tree_nodes = N;
  if (mode === 'measure') {
    if (problems.length) fail(problems.join('\n'));
    console.log(JSON.stringify(results));
  } else {
    await check(page, problems);
    console.log(JSON.stringify(results));
  }
} catch (e) {
  console.error('FAILED: ' + e.message);
  exitCode = 1;
} finally {
  await browser.close();
}
process.exit(exitCode);

async function count(page, selector) {
  return page.locator(selector).count();
}
async function tableNodes(page) {
  return page.$$eval('#tree-table tbody tr', (rows) => rows.map((r) => Number(r.dataset.node)));
}

async function check(page, problems) {
  // Timeline: one line per domain series, one marker per label, one peak per domain
  // that allocated, the process's resident (and committed) lines.
  const series = D.timeline.domains.filter((s) => D.summary.domains[s.domain].total.count > 0 || s.high.some((v) => v > 0));
  eq(await count(page, '#timeline path.series-line'), series.length, 'timeline series lines');
  eq(await count(page, '#timeline path.series-env'), series.length, 'timeline envelopes');
  eq(await count(page, '#timeline .label-marker'), D.timeline.labels.length, 'label markers');
  eq(await count(page, '#timeline .peak-marker'), series.filter((s) => D.summary.domains[s.domain].peak.count > 0).length, 'peak markers');
  const P = D.timeline.process;
  const processLines = P ? 1 + (P.committed.some((v) => v > 0) ? 1 : 0) : 0;
  eq(await count(page, '#timeline path.process-line'), processLines, 'process lines');
  results.timeline = { series: series.length, labels: D.timeline.labels.length, process_lines: processLines };

  // Treemap: one rect per node under the zoom root with bytes, at the page's point.
  const tm = async () => {
    const d = Number(await page.inputValue('#tm-domain'));
    const p = Number(await page.inputValue('#point'));
    return { d, p, want: descendantsWithBytes(d, p, 0), got: await count(page, '#treemap rect.tm-node') };
  };
  let t = await tm();
  eq(t.got, t.want, `treemap rects (domain ${t.d}, point ${t.p})`);
  if (t.want === 0) fail('the treemap is empty at the initial point');
  // At the label "level loaded", in the heap: the level's textures and meshes.
  const loaded = T.points.findIndex((p) => p.kind === 'label' && p.name === 'level loaded');
  if (loaded < 0) fail('no point at "level loaded"');
  await page.selectOption('#point', String(loaded));
  await page.selectOption('#tm-domain', String(cpuDomains[0]));
  t = await tm();
  eq([t.p, t.d], [loaded, cpuDomains[0]], 'treemap point and domain');
  eq(t.got, t.want, 'treemap rects at "level loaded"');
  results.treemap_rects = t.got;
  // Zoom into the biggest top-level context, then out again.
  const v = inclusive(T.own[t.d][t.p], 1);
  const top = T.nodes.parent.map((p, i) => [p, i]).filter(([p, i]) => p === 0 && v[i] > 0 && T.nodes.parent.some((q, j) => q === i && v[j] > 0)).sort((a, b) => v[b[1]] - v[a[1]])[0][1];
  await page.locator(`#treemap rect.tm-node[data-node="${top}"]`).click({ position: { x: 3, y: 3 } });
  eq(await count(page, '#treemap rect.tm-node'), descendantsWithBytes(t.d, t.p, top), 'treemap rects zoomed in');
  const crumb = await page.textContent('#breadcrumb b');
  eq(crumb, nameOf(top), 'breadcrumb');
  await page.locator('#breadcrumb a').first().click();
  eq(await count(page, '#treemap rect.tm-node'), t.want, 'treemap rects zoomed out');

  // Table, at the end: sorting by name orders the top-level rows A to Z, then Z to A;
  // sorting by heap bytes orders them largest first.
  await page.selectOption('#point', '0');
  const shown = shownAt(0);
  const topRows = async () => (await tableNodes(page)).filter((i) => i > 0 && T.nodes.parent[i] === 0);
  const wantTop = T.nodes.parent.map((p, i) => [p, i]).filter(([p, i]) => p === 0 && i > 0 && shown(i)).map(([, i]) => i);
  const byName = [...wantTop].sort((a, b) => (T.nodes.elided[a] - T.nodes.elided[b]) || nameOf(a).localeCompare(nameOf(b)));
  await page.click('#tree-table th[data-sort="name"]');
  eq(await topRows(), byName, 'top-level rows sorted by name');
  await page.click('#tree-table th[data-sort="name"]');
  eq(await topRows(), [...byName].reverse().sort((a, b) => T.nodes.elided[a] - T.nodes.elided[b]), 'top-level rows sorted by name, descending');
  const heapBytes = sumOver(cpuDomains, (d) => inclusive(T.own[d][0], 1));
  await page.click('#tree-table th[data-sort="g0_bytes"]');
  const got = await topRows();
  eq([...got].sort((a, b) => a - b), [...wantTop].sort((a, b) => a - b), 'top-level rows');
  for (let k = 1; k < got.length; k++) {
    if (!T.nodes.elided[got[k]] && heapBytes[got[k - 1]] < heapBytes[got[k]]) fail(`rows not by heap bytes: ${nameOf(got[k - 1])} before ${nameOf(got[k])}`);
  }
  results.sorted_rows = got.length;

  // Filters: the matching rows and their ancestors, nothing else.
  const expectFilter = (test) => {
    const keep = new Set();
    for (let i = 1; i < N; i++) {
      if (!shown(i) || !test(nameOf(i))) continue;
      keep.add(i);
      for (let p = T.nodes.parent[i]; ; p = T.nodes.parent[p]) { keep.add(p); if (p === 0) break; }
    }
    return [...keep].sort((a, b) => a - b);
  };
  const rowsNow = async () => (await tableNodes(page)).sort((a, b) => a - b);
  const before = await rowsNow();
  await page.fill('#filter', 'texture');
  const textures = expectFilter((n) => n.toLowerCase().includes('texture'));
  eq(await rowsNow(), textures, 'rows for the filter "texture"');
  if (textures.length < 3) fail('the filter "texture" should match the demo textures');
  await page.check('#regex');
  await page.fill('#filter', '^Texture:(rock|grass)\\.dds$');
  const re = /^Texture:(rock|grass)\.dds$/i;
  const two = expectFilter((n) => re.test(n));
  eq(await rowsNow(), two, 'rows for the regex');
  eq((await page.$$eval('#tree-table tr.match', (r) => r.length)), 2, 'matching rows for the regex');
  await page.fill('#filter', '(unclosed');
  const msg = await page.textContent('#filter-msg');
  if (!/invalid regular expression/.test(msg)) fail('no message for an invalid regex: ' + msg);
  eq(await page.getAttribute('#filter-msg', 'class'), 'filter-msg error', 'message class');
  eq(await rowsNow(), two, 'rows kept while the regex is invalid');
  await page.uncheck('#regex');
  await page.fill('#filter', '');
  eq(await rowsNow(), before, 'rows with no filter');
  results.filter_rows = { texture: textures.length, regex: two.length };

  // Range between two labels: the views show the later label, with a Δ column against
  // the earlier one.
  const L = D.timeline.labels;
  const iLoaded = L.findIndex((l) => l.name === 'level loaded');
  const iUnloaded = L.findIndex((l) => l.name === 'level unloaded');
  await page.selectOption('#range-from', 'l' + iLoaded);
  await page.selectOption('#range-to', 'l' + iUnloaded);
  eq(Number(await page.inputValue('#point')), L[iUnloaded].point, 'point after a label range');
  const delta = await page.textContent('#tree-table th[data-sort="delta"]');
  if (!delta.includes('level loaded')) fail('Δ column: ' + delta);
  if (!(await page.isVisible('#range-info'))) fail('no range info');
  // A range dragged across the timeline.
  await page.click('#range-clear');
  eq(await count(page, '#tree-table th[data-sort="delta"]'), 0, 'no Δ column without a range');
  const box = await page.locator('#timeline rect.overlay').boundingBox();
  await page.mouse.move(box.x + box.width * 0.1, box.y + 20);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5, box.y + 20, { steps: 5 });
  await page.mouse.move(box.x + box.width * 0.95, box.y + 20, { steps: 5 });
  await page.mouse.up();
  const info = await page.textContent('#range-info');
  if (!info.startsWith('Range ')) fail('range info after a drag: ' + info.slice(0, 80));
  const rect = await page.locator('#timeline rect.range-rect').boundingBox();
  if (!rect || Math.abs(rect.width - box.width * 0.85) > 6) fail('range rectangle: ' + JSON.stringify(rect));
  eq(await count(page, '#tree-table th[data-sort="delta"]'), 1, 'Δ column with a dragged range');
  results.range = info.slice(0, 60);
  // Hover shows the values.
  await page.mouse.move(box.x + box.width * 0.5, box.y + 30);
  if (!(await page.isVisible('#tooltip'))) fail('no tooltip on hover');

  // Allocation sites, symbolicated: the by-function table lists the island's top
  // functions in order; the by-callstack table names each site's allocating function and
  // location, and its toggle shows the whole stack (innermost first) and hides it again.
  const fnWant = D.top.domains.flatMap((d) => d.rows.map((r) => r.function));
  eq(await page.$$eval('#sites table.functions-table tbody tr[data-key] td.site .fn', (e) => e.map((x) => x.textContent)), fnWant, 'functions table');
  const siteWant = D.summary.sites.map((st) => st.site.function);
  eq(await page.$$eval('#sites table.sites-table tbody tr[data-stack] td.site .fn', (e) => e.map((x) => x.textContent)), siteWant, 'sites table functions');
  const frameName = (f) => f.function || (f.module ? f.module + '+' + f.offset : f.address);
  const stackOf = async (row, st, what) => {
    const site = { ...st.site, frames: st.site.frames.map(frameAt) };
    const toggle = row.locator('button.stack-toggle');
    await toggle.click();
    eq(await toggle.getAttribute('aria-expanded'), 'true', what + ': expanded');
    const stack = row.locator('xpath=following-sibling::tr[1]');
    if (!(await stack.isVisible()) || !(await stack.getAttribute('class')).includes('stack-row')) fail(what + ': no stack row after expanding');
    eq(await stack.locator('ol.stack > li > .fn').allTextContents(), site.frames.map(frameName), what + ': frames');
    eq(await stack.locator('ol.stack > li.inlined').count(), site.frames.filter((f) => f.inlined).length, what + ': inlined frames');
    eq(await stack.locator('ol.stack > li.site-frame > .fn').textContent(), frameName(site.frames[site.site_frame]), what + ': allocating frame');
    // The row's raw return addresses, under the stack; its frames come from them, in order.
    const raw = addressesOf(st.frames);
    const note = await stack.locator('.stack-note').textContent();
    if (!note.endsWith('return addresses: ' + raw.join(' '))) fail(`${what}: stack note ${note}, want the addresses ${raw.join(' ')}`);
    let last = 0;
    for (const f of site.frames) {
      const at = raw.indexOf(f.address, last);
      if (at < 0) fail(`${what}: frame ${f.address} not in the raw addresses after #${last}`);
      last = at;
    }
    return { toggle, stack };
  };
  // The site with the most frames in a function of the program (with a file and line).
  const known = D.summary.sites.filter((st) => st.site.file && st.site.frames.length).sort((a, b) => b.site.frames.length - a.site.frames.length)[0];
  if (!known) fail('no site with a file and line in the island');
  const siteRow = page.locator(`#sites table.sites-table tbody tr[data-stack="${known.stack}"]`);
  eq(await siteRow.locator('td.site .fn').textContent(), known.site.function, 'site row function');
  const locText = await siteRow.locator('td.site .loc').textContent();
  const base = known.site.file.split('/').pop() + ':' + known.site.line;
  if (!locText.endsWith(base)) fail(`site row location: ${locText}, want …${base}`);
  const opened = await stackOf(siteRow, known, 'site ' + known.stack);
  await opened.toggle.click();
  if (await opened.stack.isVisible()) fail('the stack row stays visible after collapsing');
  await opened.toggle.click();
  // The symbols line under the sites.
  const st = D.symbols;
  const line = await page.textContent('#symbols-line');
  const n = (x) => x.toLocaleString('en-US');
  if (!line.includes(`${n(st.with_lines + st.function_only)} of ${n(st.addresses)} address`)) fail('symbols line: ' + line);
  for (const r of st.reasons) if (!line.includes(`(${n(r.addresses)})`)) fail(`symbols line without ${r.reason}: ${line}`);
  // Leaks: the first context's first site, by function, with its stack.
  const leakSite = D.leaks.domains[0].contexts[0].sites[0];
  const leakRow = page.locator('#leaks table.leaks-table').first().locator('tbody tr.sub').first();
  eq(await leakRow.locator('td.site .fn').textContent(), leakSite.site.function, 'leak row function');
  if (leakSite.site.frames.length) await stackOf(leakRow, leakSite, 'leak');
  results.sites = { functions: fnWant.length, sites: siteWant.length, expanded: known.site.function, frames: known.site.frames.length, leak: leakSite.site.function, symbols: line };

  // The GPU section (the demo has GPU domains): at each GPU domain's peak, the block map
  // drawn, and its pivot tables sort by a click on a header (numbers largest first, by
  // their exact value; text A to Z).
  if ((await count(page, '#gpu-panel')) !== 1) fail('no GPU section');
  if ((await count(page, '#gpu-panel .gpu-map svg rect')) === 0) fail('the GPU block map draws nothing');
  const column = async (id, i) => page.$$eval(`#${id} tbody tr`, (rows, i) => rows.map((r) => r.children[i].dataset.v ?? r.children[i].textContent), i);
  await page.click('#gpu-kinds th:nth-child(3)');
  const bytes = (await column('gpu-kinds', 2)).map(Number);
  eq(bytes, [...bytes].sort((a, b) => b - a), 'GPU kinds sorted by bytes');
  if (bytes.length < 3) fail('GPU kinds: ' + bytes.length + ' rows');
  await page.click('#gpu-kinds th:nth-child(1)');
  const kinds = await column('gpu-kinds', 0);
  eq(kinds, [...kinds].sort(), 'GPU kinds sorted by name');
  results.gpu = { kinds: kinds.length, blocks: await count(page, '#gpu-blocks tbody tr') };

  // For the screenshot: the range, the treemap at "level loaded", textures expanded.
  await page.mouse.move(0, 0);
  await page.selectOption('#point', String(loaded));
  await page.fill('#filter', 'Level');
  await page.fill('#filter', '');
  await page.screenshot({ path: shotPath, fullPage: true });
  results.screenshot = shotPath;
  if (problems.length) fail(problems.join('\n'));
}
