/**
 * The dashboard at `GET /`: one static page, plain HTML and JavaScript (no
 * build step), that reads the admin API with the token the operator enters
 * once (kept in the browser's session storage, so it goes with the tab).
 *
 * It shows this node (slots, in flight, the store as it sees it) and the cluster's last hour
 * (attempts, failed attempts and their rate, every node's: `GET /v1/stats`, up to one flush of
 * the delivery minutes behind); the delivery charts (`delivery-charts.ts`, shared with the portal): per minute
 * by outcome, the first-attempt success ratio and attempt latency p50/p95, over the last hour or
 * 24 h, for every endpoint or one chosen (`GET /v1/stats/series`); the endpoints with their health, breaker state,
 * the cluster's failure rate over the last hour, limits (concurrency, rate limit, FIFO ordering) and payload filter; the event-type
 * catalog (each type's version, whether its payloads are checked, deprecated ones); the failures grouped by
 * endpoint and failure kind (retrying, dead, since when, a sample; the 50 largest groups) with a Replay button per group;
 * recent failures with their error; the
 * dead-letter queue with each letter's age and triage state, acknowledge,
 * discard (with a note and who) and replay buttons per item, a state filter
 * and a bulk "replay since";
 * and a delivery-log search. The dead letters and the delivery log show one page of `PAGE_ROWS`
 * at a time, with Older / Newer through the API's cursor. It refreshes every
 * 5 s (the page of a list shown stays). Everything the API returns is escaped before it is shown.
 */
import { PAGE_CSS, PAGE_ROWS, pageKitScript, pagerMarkup } from './page-kit.ts';
import { DELIVERY_CHARTS_CSS, DELIVERY_CHARTS_SCRIPT_URL, deliveryChartsMarkup } from './delivery-charts.ts';

const PAGE = String.raw`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Herald</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/uplot.min.css">
<style>
${PAGE_CSS}
 header{background:#1f2937} header .node{font-size:12px;opacity:.85}
 section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:.6rem 1rem;margin:0 0 1rem}
 h2{font-size:1rem;margin:.3rem 0 .6rem}
 table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}
 th{font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase}
 code{font-size:12px} .bad{color:var(--bad)} .ok{color:var(--ok)} .warn{color:var(--warn)} .muted{color:var(--muted)}
 .pill{display:inline-block;border-radius:9px;padding:0 .5rem;font-size:12px;border:1px solid currentColor}
 form.inline{display:flex;gap:.5rem;flex-wrap:wrap;align-items:end;margin:.3rem 0 .6rem} label{font-size:12px;color:var(--muted);display:flex;flex-direction:column}
 input,select,button{font:inherit} button{cursor:pointer}
 #msg{min-height:1.2em;margin:.2rem 0 .8rem} .empty{color:var(--muted);font-style:italic}
 .cards{display:flex;gap:1rem;flex-wrap:wrap} .card{min-width:8rem} .card b{display:block;font-size:1.3rem}
${DELIVERY_CHARTS_CSS}
</style></head><body>
<header><h1>Herald</h1><span class="node" id="node"></span>
<form id="login" class="inline" style="margin:0"><input id="token" type="password" size="32" placeholder="admin token" aria-label="Admin token"><button>Use token</button></form>
<button id="logout" hidden>Forget token</button></header>
<main>
<p id="msg" role="status"></p>
<section><h2>This node</h2><div class="cards" id="summary"></div>
<h2>The cluster, last hour</h2><div class="cards" id="cluster"></div></section>
<section id="charts-section"><h2>Deliveries</h2>
${deliveryChartsMarkup('every endpoint')}</section>
<section><h2>Endpoints</h2><table id="endpoints"></table></section>
<section id="types-section"><h2>Event types</h2><table id="types"></table></section>
<section><h2>Failures</h2><table id="groups"></table>
<p id="groups-more" class="muted" hidden>The 50 largest groups; the smaller ones: <code>GET /v1/failures?limit=1000</code>, or an endpoint's with <code>endpointId</code>.</p></section>
<section><h2>Recent failures</h2><table id="failures"></table></section>
<section><h2>Dead letters</h2>
<form id="bulk" class="inline"><label>Replay every dead letter since <input id="bulk-since" type="datetime-local" required></label><button>Replay since…</button></form>
<form id="triage" class="inline"><label>Show <select id="dead-state"><option value="">open (new, acknowledged)</option><option>new</option><option>acknowledged</option><option>replayed</option><option>discarded</option><option value="all">all</option></select></label>
 <label>Note for Acknowledge / Discard <input id="triage-note" size="40" maxlength="2000"></label><label>By <input id="triage-by" size="14" maxlength="200"></label></form>
<table id="dead"></table>${pagerMarkup('dead')}</section>
<section><h2>Delivery log</h2>
<form id="search" class="inline">
 <label>Endpoint <input name="endpointId" size="14"></label><label>Tenant <input name="tenantId" size="10"></label>
 <label>Event type <input name="eventType" size="14"></label>
 <label>Status <select name="status"><option value="">any</option><option>pending</option><option>in_flight</option><option>delivered</option><option>dead</option><option>cancelled</option></select></label>
 <label>Since <input name="since" type="datetime-local"></label><label>Until <input name="until" type="datetime-local"></label>
 <button>Search</button></form>
<table id="log"></table>${pagerMarkup('log')}
<div id="attempts"></div></section>
</main>
<script src="/assets/uplot.iife.min.js"></script>
<script src="${DELIVERY_CHARTS_SCRIPT_URL}"></script>
<script>
${pageKitScript('heraldToken')}
function showLogin() { const has = !!token(); $('login').hidden = has; $('logout').hidden = !has; }
const breakerClass = { closed: 'ok', 'half-open': 'warn', open: 'bad' };
const deadQuery = () => { const v = $('dead-state').value; return v === '' ? '' : v === 'all' ? '&includeReplayed=true' : '&state=' + encodeURIComponent(v); };

async function refresh() {
  if (!token()) { say('Enter the admin token (data/admin-token, or HERALD_ADMIN_TOKEN) to start.'); return; }
  try {
    const [endpoints, status, stats, recent, groups, types] = await Promise.all([
      api('/v1/endpoints'), api('/v1/status'), api('/v1/stats'), api('/v1/deliveries?limit=200'), api('/v1/failures?limit=50'), api('/v1/event-types')]);
    // The catalog: payloads of a type with a schema are checked at publish; types not listed publish unchecked.
    $('types').innerHTML = types.data.length === 0 ? '<tr><td class="empty">No event types: every type publishes unchecked (herald event-types create).</td></tr>' :
      head(['event type', 'version', 'schema', 'deprecated', 'description']) + types.data.map((t) => row(['<code>' + esc(t.name) + '</code>',
        esc(t.versions.at(-1).version), t.versions.at(-1).schema ? 'checked' : '<span class="muted">none</span>',
        t.deprecated ? '<span class="warn">since ' + esc(when(t.deprecatedAt)) + '</span>' : '', esc(t.description)], 'data-event-type="' + esc(t.name) + '"')).join('');
    lastStatus = status;
    await deadPager.load();
    deliveryCharts.setEndpoints(endpoints.data);
    await deliveryCharts.draw();
    const actors = new Map(status.actors.map((a) => [a.endpointId, a]));
    // Every node's attempts (GET /v1/stats reads the stored delivery minutes: up to one flush behind).
    const rates = new Map(stats.endpoints.map((e) => [e.endpointId, e]));
    const attempts = stats.endpoints.reduce((n, e) => n + e.attempts, 0); const failed = stats.endpoints.reduce((n, e) => n + e.failures, 0);
    $('cluster').innerHTML = [['attempts', attempts], ['failed attempts', failed], ['failure rate', attempts ? Math.round(failed / attempts * 100) + ' %' : '–'],
      ['endpoints with attempts', stats.endpoints.length]]
      .map(([k, v]) => '<div class="card"><span class="muted">' + esc(k) + '</span><b>' + esc(v) + '</b></div>').join('');
    $('node').textContent = status.node + ' · ' + status.slotsOwned + '/' + status.slotCount + ' slots' + (status.egress?.proxy ? ' · egress via proxy ' + status.egress.proxy : '');
    const d = status.deliveries;
    $('summary').innerHTML = [['pending', d.pending], ['in flight', status.inFlight], ['delivered', d.delivered], ['dead', d.dead],
      ['store', status.store.available ? 'up' : status.store.reachable ? 'UNAVAILABLE' : 'DOWN'], ['fenced writes', status.fencedWrites]]
      .map(([k, v]) => '<div class="card"><span class="muted">' + esc(k) + '</span><b>' + esc(v ?? 0) + '</b></div>').join('');
    const dl = status.deadLetters; const overdue = dl.unreviewed > 0 && dl.oldestUnreviewedAgeMs > dl.reviewWithinMs;
    $('summary').insertAdjacentHTML('beforeend', '<div class="card" id="unreviewed"><span class="muted">unreviewed dead letters</span><b class="' +
      (overdue ? 'bad' : dl.unreviewed > 0 ? 'warn' : 'ok') + '">' + esc(dl.unreviewed) + (dl.unreviewed > 0 ? ' <small>oldest ' + esc(durationText(dl.oldestUnreviewedAgeMs)) +
      (overdue ? ', limit ' + esc(durationText(dl.reviewWithinMs)) : '') + '</small>' : '') + '</b></div>');

    $('endpoints').innerHTML = endpoints.data.length === 0 ? '<tr><td class="empty">No endpoints yet.</td></tr>' :
      head(['endpoint', 'tenant', 'url', 'health', 'breaker', 'failure rate (1 h, cluster)', 'limits', 'signing', 'queued', 'last error', '']) +
      endpoints.data.map((e) => {
        const a = actors.get(e.id); const r = rates.get(e.id); const breaker = a?.breaker ?? 'closed';
        const health = e.status === 'disabled' ? '<span class="bad">disabled (' + esc(e.disabledReason) + ')</span>'
          : e.failingSince != null ? '<span class="warn">failing since ' + esc(when(e.failingSince)) + '</span>' : '<span class="ok">healthy</span>';
        const rate = r ? Math.round(r.failureRate * 100) + ' % <span class="muted">(' + r.failures + '/' + r.attempts + ')</span>' : '<span class="muted">no attempts</span>';
        const action = e.status === 'disabled' ? '<button data-enable="' + esc(e.id) + '">Enable</button>' : '';
        const limits = esc(e.concurrency) + ' at once' + (e.rateLimit ? ' · ' + esc(+e.rateLimit.perSecond.toPrecision(4)) + '/s, burst ' + esc(e.rateLimit.burst) : '')
          + (e.ordering === 'fifo' ? ' · FIFO, one per key' : '');
        const filter = e.filter ? '<br><span class="muted">filter <code data-filter>' + esc(JSON.stringify(e.filter)) + '</code></span>' : '';
        return row(['<code>' + esc(e.id) + '</code>', esc(e.tenantId), esc(e.url) + sentText(e) + clientCert(e.clientTls) + filter, health,
          '<span class="pill ' + breakerClass[breaker] + '">' + esc(breaker) + '</span>', rate, limits, signingText(e), esc((a?.queued ?? 0) + (a?.running ?? 0)),
          '<span class="bad">' + esc(a?.lastError ?? r?.lastError ?? '') + '</span>', action], 'data-endpoint="' + esc(e.id) + '"');
      }).join('');

    // Groups come largest first with no cursor (their order changes as failures come and go): one page of the largest.
    $('groups-more').hidden = groups.data.length < 50;
    $('groups').innerHTML = groups.data.length === 0 ? '<tr><td class="empty">No failures.</td></tr>' :
      head(['endpoint', 'kind', 'count', 'retrying', 'dead', 'since', 'last', 'sample', '']) +
      groups.data.map((g) => row(['<code>' + esc(g.endpointId) + '</code>', '<span class="pill bad">' + esc(g.kind) + '</span>', '<b>' + esc(g.count.total) + '</b>',
        esc(g.count.retrying), esc(g.count.dead), esc(when(g.firstSeen)), esc(when(g.lastSeen)),
        g.sample ? '<span class="bad">' + esc(g.sample.summary) + '</span>' + (g.sample.body ? ' <code>' + esc(g.sample.body.slice(0, 80)) + '</code>' : '') : '',
        '<button data-group-endpoint="' + esc(g.endpointId) + '" data-group-kind="' + esc(g.kind) + '">Replay</button>'],
        'data-group="' + esc(g.endpointId + ' ' + g.kind) + '"')).join('');

    const failures = recent.data.filter((x) => x.lastError != null && x.status !== 'delivered').slice(0, 20);
    $('failures').innerHTML = failures.length === 0 ? '<tr><td class="empty">No recent failures.</td></tr>' :
      head(['created', 'endpoint', 'event type', 'status', 'attempts', 'next attempt', 'error']) +
      failures.map((x) => row([esc(when(x.createdAt)), '<code>' + esc(x.endpointId) + '</code>', esc(x.eventType), esc(x.status), esc(x.attempts),
        x.status === 'pending' ? esc(when(x.nextAttemptAt)) : '', '<span class="bad">' + esc(x.lastError) + '</span>'])).join('');

    if ($('msg').className === 'bad' || !$('msg').textContent) say('');
    await logPager.load();
  } catch (e) { say(e.message, true); }
}

// The long lists show ${PAGE_ROWS} rows at a time, paged with the API's cursor (pager in page-kit.ts);
// a refresh reloads the page shown.
let lastStatus = null;
const deadPager = pager('dead', ${PAGE_ROWS}, () => '/v1/dead-letters?' + deadQuery(), (rows) => {
  $('dead').innerHTML = rows.length === 0 ? '<tr><td class="empty">No dead letter ' + ($('dead-state').value === '' ? 'waits' : 'matches') + '.</td></tr>' :
    head(['died', 'age', 'state', 'endpoint', 'event', 'attempts', 'reason', '']) +
    rows.map((x) => {
      const t = x.triage; const open = t.state === 'new' || t.state === 'acknowledged';
      const late = t.state === 'new' && x.ageMs > (lastStatus?.deadLetters.reviewWithinMs ?? Infinity);
      const state = '<span class="pill ' + (late ? 'bad' : t.state === 'new' ? 'warn' : 'ok') + '">' + esc(t.state) + '</span>' +
        (t.by ? ' <span class="muted">by ' + esc(t.by) + ' ' + esc(when(t.at)) + ':</span> ' + esc(t.note) : '');
      const actions = open ? '<button data-replay="' + esc(x.id) + '">Replay</button> <button data-ack="' + esc(x.id) + '">Acknowledge</button> ' +
        '<button data-discard="' + esc(x.id) + '">Discard</button>' : '';
      return row([esc(when(x.createdAt)), '<span class="' + (late ? 'bad' : '') + '">' + esc(durationText(x.ageMs)) + '</span>', state, '<code>' + esc(x.endpointId) + '</code>',
        esc(x.eventType) + ' <code>' + esc(x.eventId) + '</code>', esc(x.attempts.length), '<span class="bad">' + esc(x.reason) + '</span>', actions],
        'data-dead-letter="' + esc(x.id) + '" data-state="' + esc(t.state) + '"');
    }).join('');
});
function logQuery() {
  const form = new FormData($('search')); const q = new URLSearchParams();
  for (const [k, v] of form) if (v) q.set(k, (k === 'since' || k === 'until') ? new Date(v).toISOString() : v);
  return '/v1/deliveries?' + q;
}
const logPager = pager('log', ${PAGE_ROWS}, logQuery, (rows) => {
  $('log').innerHTML = rows.length === 0 ? '<tr><td class="empty">No deliveries match.</td></tr>' :
    head(['created', 'endpoint', 'event type', 'status', 'attempts', 'last error', '']) +
    rows.map((x) => row([esc(when(x.createdAt)), '<code>' + esc(x.endpointId) + '</code>', esc(x.eventType),
      '<span class="' + (x.status === 'delivered' ? 'ok' : x.status === 'dead' ? 'bad' : '') + '">' + esc(x.status) + '</span>', esc(x.attempts),
      '<span class="bad">' + esc(x.lastError ?? '') + '</span>', '<button data-attempts="' + esc(x.id) + '">Attempts</button>'],
      'data-delivery="' + esc(x.id) + '" data-status="' + esc(x.status) + '"')).join('');
});

document.addEventListener('click', async (ev) => {
  const t = ev.target; if (!(t instanceof HTMLElement)) return;
  try {
    if (t.dataset.replay) {
      await api('/v1/dead-letters/' + encodeURIComponent(t.dataset.replay) + '/replay', { method: 'POST' });
      say('Replayed ' + t.dataset.replay + '; it is due now.'); refresh(); setTimeout(refresh, 700);
    } else if (t.dataset.groupEndpoint) {
      const group = { endpointId: t.dataset.groupEndpoint, kind: t.dataset.groupKind };
      const r = await api('/v1/failures/replay', { method: 'POST', body: JSON.stringify(group) });
      say('Replayed ' + group.kind + ' on ' + group.endpointId + ': ' + r.deadLetters + ' dead letter(s) replayed, ' + r.retrying + ' retrying delivery(ies) due now.');
      refresh(); setTimeout(refresh, 700);
    } else if (t.dataset.ack || t.dataset.discard) {
      const id = t.dataset.ack || t.dataset.discard; const action = t.dataset.ack ? 'acknowledge' : 'discard';
      const note = $('triage-note').value.trim(); const by = $('triage-by').value.trim();
      if (!note || !by) { say('Write a note and your name (By) above first: ' + action + ' records them.', true); $(note ? 'triage-by' : 'triage-note').focus(); return; }
      await api('/v1/dead-letters/' + encodeURIComponent(id) + '/' + action, { method: 'POST', body: JSON.stringify({ note, by }) });
      sessionStorage.setItem('heraldBy', by); $('triage-note').value = '';
      say((action === 'acknowledge' ? 'Acknowledged ' : 'Discarded ') + id + '.'); refresh();
    } else if (t.dataset.enable) {
      await api('/v1/endpoints/' + encodeURIComponent(t.dataset.enable) + '/enable', { method: 'POST' });
      say('Enabled ' + t.dataset.enable + '; its waiting deliveries go out now.'); refresh();
    } else if (t.dataset.attempts) {
      const path = '/v1/deliveries/' + encodeURIComponent(t.dataset.attempts);
      const [{ data }, delivery] = await Promise.all([api(path + '/attempts'), api(path)]);
      // The trace id of its event (W3C traceparent 00-<trace id>-<span id>-<flags>), to look it up in the tracing backend.
      const traceId = delivery.traceContext ? delivery.traceContext.traceparent.split('-')[1] : null;
      $('attempts').innerHTML = '<h2>Attempts of <code>' + esc(t.dataset.attempts) + '</code></h2>' +
        (traceId ? '<p>trace <code id="trace-id">' + esc(traceId) + '</code></p>' : '') + '<table>' + head(['round', '#', 'started', 'duration', 'result']) +
        data.map((a) => row([esc(a.round), esc(a.number), esc(when(a.startedAt)), esc(durationText(a.durationMs)),
          a.error ? '<span class="bad">' + esc(a.error) + '</span>' : '<span class="ok">HTTP ' + esc(a.outcome.status) + '</span>'])).join('') + '</table>';
    }
  } catch (e) { say(e.message, true); }
});
$('bulk').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  try {
    const since = new Date($('bulk-since').value).toISOString();
    const r = await api('/v1/dead-letters/replay', { method: 'POST', body: JSON.stringify({ since }) });
    say('Replayed ' + r.replayed + ' dead letter(s) since ' + since + '.'); refresh();
  } catch (e) { say(e.message, true); }
});
$('search').addEventListener('submit', (ev) => { ev.preventDefault(); logPager.load(true).catch((e) => say(e.message, true)); });
$('triage').addEventListener('submit', (ev) => ev.preventDefault());
$('dead-state').addEventListener('change', () => deadPager.load(true).catch((e) => say(e.message, true)));
$('triage-by').value = sessionStorage.getItem('heraldBy') ?? '';
$('login').addEventListener('submit', (ev) => { ev.preventDefault(); sessionStorage.setItem('heraldToken', $('token').value.trim()); $('token').value = ''; showLogin(); refresh(); });
$('logout').addEventListener('click', () => { sessionStorage.removeItem('heraldToken'); showLogin(); say('Token forgotten.'); });
deliveryCharts.start({ api, onError: (e) => say(e.message, true) });
showLogin(); refresh();
setInterval(() => token() && refresh(), 5000);
</script></body></html>`;

export function dashboardHtml(): string {
  return PAGE;
}
