/**
 * The delivery charts, one implementation for two pages: the dashboard (every endpoint) and the
 * tenants' portal (the tenant's own endpoints, because the API scopes a tenant token's
 * `GET /v1/stats/series` to its tenant). Three charts of the series the page fetches with its own
 * token: deliveries by outcome (delivered, retries scheduled, dead-lettered), the first-attempt
 * success ratio in percent, and attempt latency p50/p95 in ms; for every endpoint the caller sees
 * or one picked in a list; over the last hour or the last 24 h.
 *
 * A page inlines the section's markup and styles and loads the script after uPlot's
 * (`<script src>` of {@link DELIVERY_CHARTS_SCRIPT_URL}, served as an open asset by
 * chart-assets.ts). The script defines one global, `deliveryCharts`:
 *
 * - `start({ api, onError })` wires the endpoint picker, the `1 h` / `24 h` buttons and resizing,
 *   once; `api(path)` is the page's authenticated JSON fetch, `onError(error)` shows a failure;
 * - `setEndpoints(list)` fills the picker from `GET /v1/endpoints`' `data`, keeping the choice
 *   while it is still listed;
 * - `draw()` fetches the series of the choice and window and draws it: each chart is made once
 *   per step size and given new data after that;
 * - `charts` (name → uPlot) and `lastSeries` (the series drawn last) for tests.
 */
import { createHash } from 'node:crypto';

/** Where chart-assets.ts serves {@link DELIVERY_CHARTS_SCRIPT}. */
export const DELIVERY_CHARTS_SCRIPT_PATH = '/assets/herald-charts.js';

/**
 * The browser script. Plain JavaScript (no build step), a classic script: one global,
 * `deliveryCharts`, and everything else inside it.
 */
export const DELIVERY_CHARTS_SCRIPT = String.raw`/* Herald's delivery charts (lib/api/delivery-charts.ts), drawn with uPlot (/assets/uplot.iife.min.js, loaded first). */
const deliveryCharts = (() => {
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
  // Per chart: [field of a point, legend label, colour, factor (the ratio is drawn in percent)].
  const DEFS = {
    outcomes: { series: [['delivered', 'delivered', '#0a7d2c'], ['retriesScheduled', 'retries scheduled', '#9a6700'], ['deadLettered', 'dead-lettered', '#b00020']] },
    ratio: { series: [['firstAttemptSuccessRatio', 'first-attempt success', '#1f6feb', 100]], range: [0, 100] },
    latency: { series: [['latencyP50Ms', 'p50', '#1f6feb'], ['latencyP95Ms', 'p95', '#8250df']] },
  };
  const charts = {};
  let chartWindow = '1h'; let lastSeries = null; let api = null; let onError = () => {};
  // A draw answered after a later one started (a refresh racing a click) is dropped, so the page shows what was chosen last.
  let drawing = 0;

  function dataOf(series, def) {
    const xs = series.points.map((p) => p.at / 1000);
    return [xs, ...def.series.map(([field, , , factor]) => series.points.map((p) => p[field] == null ? null : factor ? p[field] * factor : p[field]))];
  }
  async function draw() {
    const select = $('chart-endpoint'); const endpointId = select.value || 'all';
    const ticket = ++drawing;
    const series = await api('/v1/stats/series?endpointId=' + encodeURIComponent(endpointId) + '&window=' + chartWindow);
    if (ticket !== drawing) return;
    lastSeries = series;
    const per = series.stepMs === 60000 ? 'per minute' : 'per 10 minutes';
    const which = endpointId === 'all' ? select.options[0].textContent : endpointId;
    $('chart-outcomes-title').textContent = 'Deliveries by outcome (' + per + ')';
    $('chart-note').textContent = which + ', last ' + (series.window === '1h' ? 'hour' : '24 hours') + ', a point ' + per.replace('per ', 'every ');
    for (const [name, def] of Object.entries(DEFS)) {
      const el = $('chart-' + name); const data = dataOf(series, def);
      const chart = charts[name];
      if (chart && chart.stepMs === series.stepMs) { chart.setData(data); continue; }
      if (chart) chart.destroy();
      const width = Math.max(320, el.clientWidth || 400); const half = series.stepMs / 2000;
      // Half a step of room at each end, so the first and last points are drawn whole.
      const x = { time: true, range: (u, min, max) => [min - half, max + half] };
      charts[name] = new uPlot({ width, height: 200, legend: { live: false },
        scales: def.range ? { x, y: { range: def.range } } : { x, y: { range: (u, min, max) => [0, Math.max(1, max ?? 1) * 1.1] } },
        series: [{}, ...def.series.map(([, label, color]) => ({ label, stroke: color, width: 2, points: { show: true, size: 7, fill: color }, spanGaps: false }))],
        axes: [{}, { size: 50 }] }, data, el);
      charts[name].stepMs = series.stepMs;
    }
  }
  function setEndpoints(list) {
    const select = $('chart-endpoint'); const chosen = select.value; const all = select.options[0].outerHTML;
    select.innerHTML = all + list.map((e) => '<option value="' + esc(e.id) + '">' + esc(e.id) +
      (e.description ? ' (' + esc(e.description) + ')' : '') + '</option>').join('');
    select.value = list.some((e) => e.id === chosen) ? chosen : 'all';
  }
  function start(options) {
    api = options.api; onError = options.onError;
    const redraw = () => draw().catch(onError);
    $('chart-endpoint').addEventListener('change', redraw);
    document.querySelectorAll('[data-window]').forEach((b) => b.addEventListener('click', () => {
      chartWindow = b.dataset.window;
      document.querySelectorAll('[data-window]').forEach((other) => other.setAttribute('aria-pressed', String(other === b)));
      redraw();
    }));
    window.addEventListener('resize', () => { for (const [name, chart] of Object.entries(charts)) chart.setSize({ width: Math.max(320, $('chart-' + name).clientWidth), height: 200 }); });
  }
  return { start, draw, setEndpoints, charts, get lastSeries() { return lastSeries; } };
})();
`;

/** The script's URL with a digest of its text, so a browser holding an older one in its cache fetches the new one. */
export const DELIVERY_CHARTS_SCRIPT_URL = `${DELIVERY_CHARTS_SCRIPT_PATH}?v=${createHash('sha256').update(DELIVERY_CHARTS_SCRIPT).digest('base64url').slice(0, 12)}`;

/** The charts' styles, for the page's `<style>` (uPlot's own come from `/assets/uplot.min.css`). */
export const DELIVERY_CHARTS_CSS = String.raw`
 .charts{display:flex;gap:1rem;flex-wrap:wrap} .chart{flex:1 1 400px;min-width:360px} .chart h3{font-size:13px;margin:.2rem 0;color:var(--muted);font-weight:600}
 .toggle button[aria-pressed="true"]{background:#1f2937;color:#fff}
 .u-legend th{text-transform:none;font-size:12px;color:inherit;font-weight:normal} .u-legend td,.u-legend th{border:0}`;

/**
 * The controls and the three charts' places, inside the page's own section.
 * @param allLabel what the picker calls every endpoint the caller sees, e.g. `every endpoint`.
 */
export function deliveryChartsMarkup(allLabel: string): string {
  return String.raw`<form id="chart-controls" class="inline"><label>Endpoint <select id="chart-endpoint"><option value="all">${escapeHtml(allLabel)}</option></select></label>
 <span class="toggle" role="group" aria-label="Window"><button type="button" data-window="1h" aria-pressed="true">1 h</button> <button type="button" data-window="24h" aria-pressed="false">24 h</button></span>
 <span class="muted" id="chart-note"></span></form>
<div class="charts"><div class="chart"><h3 id="chart-outcomes-title">Deliveries by outcome</h3><div id="chart-outcomes"></div></div>
<div class="chart"><h3>First-attempt success ratio (%)</h3><div id="chart-ratio"></div></div>
<div class="chart"><h3>Attempt latency (ms)</h3><div id="chart-latency"></div></div></div>`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
