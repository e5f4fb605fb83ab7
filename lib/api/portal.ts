/**
 * The tenants' portal at `GET /portal`: one static page, plain HTML and
 * JavaScript (no build step, nothing from a CDN), for a tenant's own
 * developers. The page carries no data: it asks for a tenant token (kept in the
 * tab's session storage) and reads the admin API with it, which answers only
 * with that tenant's data (`caller-scope.ts`).
 *
 * It shows the event types the platform defines (the catalog: description, schema version, deprecated
 * ones marked), the tenant's endpoints with their event types, payload filter, health and failure rate over the
 * last hour (every node's attempts, `GET /v1/stats`), a Send test event, Rotate secret, Filter and Disable/Enable button per
 * endpoint and the test event's outcome as it happens; the filter editor (set, remove, and try a filter on a sample
 * event before saving it, `POST /v1/endpoints/:id/filter-test`); the delivery charts of
 * its endpoints, all or one picked, over the last hour or 24 h
 * (`delivery-charts.ts`, shared with the dashboard); the open dead letters with
 * Replay, the delivery log (filtered by endpoint, status, event type) with each
 * delivery's payload and attempts (status, duration, response body) — these two
 * one page of `PAGE_ROWS` at a time, Older / Newer through the API's cursor; an endpoint's
 * events after sequence number N (`webhook-sequence`), in order and paged, to
 * explain a gap a consumer saw; and how to
 * verify signatures: the secret of the last rotation or creation made here (an
 * ed25519 endpoint's public key, which its row shows any time), and a Node snippet. It refreshes every 5 s. Everything the API returns is escaped
 * before it is shown.
 *
 * A link may carry the token in its fragment, `/portal#token=htk_…`: a fragment
 * is never sent to a server (RFC 9110 §4.2.4), and the page moves it into
 * session storage and removes it from the address bar at once.
 */
import { PAGE_CSS, PAGE_ROWS, pageKitScript, pagerMarkup } from './page-kit.ts';
import { DELIVERY_CHARTS_CSS, DELIVERY_CHARTS_SCRIPT_URL, deliveryChartsMarkup } from './delivery-charts.ts';

const PAGE = String.raw`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Webhooks — developer portal</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="stylesheet" href="/assets/uplot.min.css">
<style>
${PAGE_CSS}
 header{background:#12355b} header .who{font-size:12px;opacity:.85}
 section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:.6rem 1rem;margin:0 0 1rem}
 h2{font-size:1rem;margin:.3rem 0 .6rem} h3{font-size:.9rem;margin:.8rem 0 .4rem}
 table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}
 th{font-weight:600;color:var(--muted);font-size:12px;text-transform:uppercase}
 code,pre{font-size:12px} pre{background:#f3f4f6;padding:.6rem;border-radius:4px;overflow:auto;max-height:20rem;margin:.3rem 0}
 .bad{color:var(--bad)} .ok{color:var(--ok)} .warn{color:var(--warn)} .muted{color:var(--muted)}
 .pill{display:inline-block;border-radius:9px;padding:0 .5rem;font-size:12px;border:1px solid currentColor}
 form.inline{display:flex;gap:.5rem;flex-wrap:wrap;align-items:end;margin:.3rem 0 .6rem} label{font-size:12px;color:var(--muted);display:flex;flex-direction:column}
 input,select,button{font:inherit} button{cursor:pointer}
 #msg{min-height:1.2em;margin:.2rem 0 .8rem} .empty{color:var(--muted);font-style:italic}
${DELIVERY_CHARTS_CSS}
</style></head><body>
<header><h1>Webhooks — developer portal</h1><span class="who" id="who"></span>
<form id="login" class="inline" style="margin:0"><input id="token" type="password" size="40" placeholder="your token (htk_…)" aria-label="Token"><button>Sign in</button></form>
<button id="logout" hidden>Sign out</button></header>
<main>
<p id="msg" role="status"></p>
<section><h2>Your endpoints</h2><table id="endpoints"></table><div id="test-result"></div>
<form id="filter-form" hidden><h3>Payload filter of <code id="filter-of"></code></h3>
<p class="muted">Only events matching it are sent to this endpoint, e.g. <code>{"payload.amount": {"$gte": 100}, "payload.country": {"$in": ["BR", "PT"]}}</code>.
Operators: $eq $ne $gt $gte $lt $lte $in $nin $exists $or $and. Empty: every event of its event types.</p>
<label>Filter (JSON) <textarea name="filter" rows="5" cols="70"></textarea></label>
<p><button type="button" id="filter-save">Save filter</button> <button type="button" id="filter-remove">Remove filter</button>
 <button type="button" id="filter-close">Close</button></p>
<div class="inline"><label>Try it on an event type <input name="type" size="20" placeholder="order.paid"></label>
<label>and payload (JSON) <textarea name="payload" rows="3" cols="50">{}</textarea></label>
<button type="button" id="filter-try">Try</button></div><p id="filter-result" role="status"></p></form></section>
<section id="types-section"><h2>Event types you can subscribe to</h2><table id="types"></table></section>
<section id="charts-section"><h2>Deliveries over time</h2>
${deliveryChartsMarkup('all your endpoints')}</section>
<section><h2>Failed deliveries (dead letters)</h2><table id="dead"></table>${pagerMarkup('dead')}</section>
<section><h2>Delivery log</h2>
<form id="search" class="inline">
 <label>Endpoint <input name="endpointId" size="38"></label><label>Event type <input name="eventType" size="16"></label>
 <label>Status <select name="status"><option value="">any</option><option>pending</option><option>in_flight</option><option>delivered</option><option>dead</option><option>cancelled</option></select></label>
 <button>Search</button></form>
<table id="log"></table>${pagerMarkup('log')}
<div id="detail"></div></section>
<section id="sequence"><h2>Events after sequence N</h2>
<p class="muted">Each request to an endpoint carries <code>webhook-sequence</code>: 1, 2, 3, … per endpoint. A number you have not
received is still on its way (retrying, or waiting while the endpoint is disabled) or failed for good (a dead letter: replay it):
list what comes after the last number you saw.</p>
<form id="seq-form" class="inline">
 <label>Endpoint <input name="endpointId" size="38" required></label><label>After <input name="after" type="number" min="0" value="0" size="8"></label>
 <button>Show</button></form>
<table id="seq"></table><p><button id="seq-more" hidden>Next page</button></p></section>
<section id="verify"><h2>Verifying signatures</h2>
<p>Every request carries the <a href="https://www.standardwebhooks.com/">Standard Webhooks</a> headers <code>webhook-id</code>,
<code>webhook-timestamp</code> and <code>webhook-signature</code>: an HMAC-SHA256 of <code>id.timestamp.body</code> with your endpoint's
secret (<code>v1,</code>), or for an ed25519 endpoint an ed25519 signature of it that its public key (<code>whpk_…</code>, in the endpoints
table) verifies (<code>v1a,</code>). Check it on the raw body, before parsing it, and refuse a timestamp more than 5 minutes away from your clock.</p>
<p id="secret-line" class="muted">Your signing secret was shown when the endpoint was created. To get a new one here, press Rotate secret:
the old secret keeps signing for a while, so you can deploy the new one first.</p>
<pre id="snippet"></pre></section>
</main>
<script src="/assets/uplot.iife.min.js"></script>
<script src="${DELIVERY_CHARTS_SCRIPT_URL}"></script>
<script>
${pageKitScript('heraldPortalToken')}
const pretty = (v) => { try { return JSON.stringify(typeof v === 'string' ? JSON.parse(v) : v, null, 2); } catch { return String(v); } };
function showLogin() { const has = !!token(); $('login').hidden = has; $('logout').hidden = !has; if (!has) $('who').textContent = ''; }
// A link may carry the token in its fragment (never sent to the server): keep it for the tab, then clear the address bar.
(() => { const m = /(?:^#|&)token=([^&]+)/.exec(location.hash); if (!m) return;
  sessionStorage.setItem('heraldPortalToken', decodeURIComponent(m[1])); history.replaceState(null, '', location.pathname + location.search); })();

function snippet(secret) {
  if (secret && secret.startsWith('whpk_')) return "import { createPublicKey, verify } from 'node:crypto';\n\n" +
    "const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from('" + secret.slice(5) + "', 'base64').toString('base64url') }, format: 'jwk' });\n\n" +
    "app.post('/hooks', express.raw({ type: 'application/json' }), (req, res) => {\n" +
    "  const signed = Buffer.concat([Buffer.from(req.headers['webhook-id'] + '.' + req.headers['webhook-timestamp'] + '.'), req.body]);\n" +
    "  const ok = String(req.headers['webhook-signature']).split(' ').filter((s) => s.startsWith('v1a,'))\n" +
    "    .some((s) => verify(null, signed, key, Buffer.from(s.slice(4), 'base64')));\n" +
    "  if (!ok || Math.abs(Date.now() / 1000 - Number(req.headers['webhook-timestamp'])) > 300) return res.status(400).end();\n" +
    "  // req.headers['webhook-id'] is the same on every retry of one event: use it to drop duplicates.\n" +
    "  res.status(204).end();\n" +
    "});\n";
  return "// npm install standardwebhooks   (or, inside a Herald install: import { verify } from 'herald')\n" +
    "import { Webhook } from 'standardwebhooks';\n\n" +
    "const wh = new Webhook('" + (secret ?? 'whsec_…your endpoint secret…') + "');\n\n" +
    "app.post('/hooks', express.raw({ type: 'application/json' }), (req, res) => {\n" +
    "  let event;\n" +
    "  try {\n" +
    "    event = wh.verify(req.body.toString('utf8'), req.headers);   // throws when the signature or timestamp is wrong\n" +
    "  } catch {\n" +
    "    return res.status(400).end();\n" +
    "  }\n" +
    "  // req.headers['webhook-id'] is the same on every retry of one event: use it to drop duplicates.\n" +
    "  res.status(204).end();\n" +
    "});\n";
}
function showSecret(endpointId, secret) {
  $('secret-line').className = '';
  $('secret-line').innerHTML = secret.startsWith('whpk_')
    ? 'Public key (ed25519) of <code>' + esc(endpointId) + '</code>, also in the endpoints table: <code id="secret">' + esc(secret) + '</code>'
    : 'Secret of <code>' + esc(endpointId) + '</code>, shown once — copy it now: <code id="secret">' + esc(secret) + '</code>';
  $('snippet').textContent = snippet(secret);
}

let testWatch = null;
let filterFor = null;
function parsed(text, what) { try { return JSON.parse(text); } catch { throw new Error(what + ' is not valid JSON.'); } }
async function refresh() {
  if (!token()) { say('Sign in with the token you were given (it starts with htk_).'); return; }
  try {
    const [endpoints, stats, types] = await Promise.all([api('/v1/endpoints'), api('/v1/stats'), api('/v1/event-types'), deadPager.load()]);
    // The catalog (global to the platform): a deprecated type still arrives, but is on its way out.
    $('types').innerHTML = types.data.length === 0 ? '<tr><td class="empty">No event types listed: ask the platform which types it sends.</td></tr>' :
      head(['event type', 'description', 'schema', '']) + types.data.map((t) => row(['<code>' + esc(t.name) + '</code>', esc(t.description),
        t.versions.at(-1).schema ? 'version ' + esc(t.versions.at(-1).version) : '<span class="muted">none</span>',
        t.deprecated ? '<span class="warn pill">deprecated</span>' + (t.deprecationNote ? ' <span class="muted">' + esc(t.deprecationNote) + '</span>' : '') : ''],
        'data-event-type="' + esc(t.name) + '"')).join('');
    const rates = new Map(stats.endpoints.map((e) => [e.endpointId, e]));
    const tenants = [...new Set(endpoints.data.map((e) => e.tenantId))];
    $('who').textContent = tenants.length ? 'tenant ' + tenants.join(', ') : '';
    $('endpoints').innerHTML = endpoints.data.length === 0 ? '<tr><td class="empty">No endpoints yet.</td></tr>' :
      head(['endpoint', 'url', 'event types', 'health', 'failures (1 h)', 'signing', '']) +
      endpoints.data.map((e) => {
        const r = rates.get(e.id);
        const health = e.status === 'disabled' ? '<span class="bad">disabled (' + esc(e.disabledReason) + ')</span>'
          : e.failingSince != null ? '<span class="warn">failing since ' + esc(when(e.failingSince)) + '</span>' : '<span class="ok">healthy</span>';
        const rate = r ? Math.round(r.failureRate * 100) + ' % <span class="muted">(' + r.failures + '/' + r.attempts + ')</span>' : '<span class="muted">no attempts</span>';
        const id = esc(e.id);
        return row(['<code>' + id + '</code>' + (e.description ? '<br><span class="muted">' + esc(e.description) + '</span>' : ''), esc(e.url) + sentText(e) + clientCert(e.clientTls),
          esc(e.eventTypes.length ? e.eventTypes.join(', ') : 'every type') + (e.filter ? '<br><span class="muted">filter</span> <code data-filter>' +
            esc(JSON.stringify(e.filter)) + '</code>' : ''), health, rate, signingText(e),
          '<button data-test="' + id + '">Send test event</button> <button data-rotate="' + id + '">Rotate secret</button> ' +
          '<button data-filter-edit="' + id + '">Filter</button> ' +
          (e.status === 'disabled' ? '<button data-enable="' + id + '">Enable</button>' : '<button data-disable="' + id + '">Disable</button>') +
          ' <button data-log="' + id + '">Deliveries</button> <button data-seq="' + id + '">Events by sequence</button>'], 'data-endpoint="' + id + '"');
      }).join('');
    deliveryCharts.setEndpoints(endpoints.data);
    await deliveryCharts.draw();
    await search();
    if (testWatch) await showTest();
    if ($('msg').className === 'bad' && !searchFailed) say('');
  } catch (e) { say(e.message, true); }
}

// The long lists show ${PAGE_ROWS} rows at a time, paged with the API's cursor (pager in page-kit.ts);
// a refresh reloads the page shown.
const deadPager = pager('dead', ${PAGE_ROWS}, () => '/v1/dead-letters', (rows) => {
  $('dead').innerHTML = rows.length === 0 ? '<tr><td class="empty">Nothing failed for good.</td></tr>' :
    head(['died', 'endpoint', 'event', 'attempts', 'reason', '']) +
    rows.map((x) => row([esc(when(x.createdAt)), '<code>' + esc(x.endpointId) + '</code>', esc(x.eventType) + ' <code>' + esc(x.eventId) + '</code>',
      esc(x.attempts.length), '<span class="bad">' + esc(x.reason) + '</span>', '<button data-replay="' + esc(x.id) + '">Replay</button>'],
      'data-dead-letter="' + esc(x.id) + '"')).join('');
});
const logPager = pager('log', ${PAGE_ROWS}, () => {
  const q = new URLSearchParams();
  for (const [k, v] of new FormData($('search'))) if (v) q.set(k, v);
  return '/v1/deliveries?' + q;
}, (rows) => {
  $('log').innerHTML = rows.length === 0 ? '<tr><td class="empty">No deliveries match.</td></tr>' :
    head(['created', 'endpoint', 'event type', 'status', 'attempts', 'last error', '']) +
    rows.map((x) => row([esc(when(x.createdAt)), '<code>' + esc(x.endpointId) + '</code>', esc(x.eventType),
      '<span class="' + (x.status === 'delivered' ? 'ok' : x.status === 'dead' ? 'bad' : '') + '">' + esc(x.status) + '</span>', esc(x.attempts),
      '<span class="bad">' + esc(x.lastError ?? '') + '</span>', '<button data-detail="' + esc(x.id) + '">Payload and attempts</button>'],
      'data-delivery="' + esc(x.id) + '" data-status="' + esc(x.status) + '"')).join('');
});
let searchFailed = false;
// The delivery log: the page shown again, or (fresh) the first page of what the form asks now.
async function search(fresh) {
  try {
    await logPager.load(fresh);
    searchFailed = false;
  } catch (e) { searchFailed = true; $('log').innerHTML = ''; say(e.message, true); }
}

let seqNext = null;
async function sequence(next) {
  const f = $('seq-form').elements;
  const after = next ? seqNext : f.after.value || '0';
  try {
    const page = await api('/v1/endpoints/' + encodeURIComponent(f.endpointId.value.trim()) + '/events?limit=25&after=' + encodeURIComponent(after));
    seqNext = page.nextAfter; $('seq-more').hidden = seqNext === null;
    const rows = page.data.map((x) => row(['<b>' + esc(x.sequence) + '</b>', esc(x.eventType) + ' <code>' + esc(x.eventId) + '</code>',
      '<span class="' + (x.status === 'delivered' ? 'ok' : x.status === 'dead' ? 'bad' : 'warn') + '">' + esc(x.status) + '</span>',
      esc(when(x.createdAt)), esc(x.deliveredAt == null ? '' : when(x.deliveredAt)), '<button data-detail="' + esc(x.deliveryId) + '">Payload and attempts</button>'],
      'data-sequence="' + esc(x.sequence) + '"')).join('');
    if (next) $('seq').insertAdjacentHTML('beforeend', rows);
    else $('seq').innerHTML = page.data.length === 0 ? '<tr><td class="empty">Nothing numbered after ' + esc(after) + '.</td></tr>' :
      head(['sequence', 'event', 'status', 'created', 'delivered', '']) + rows;
  } catch (e) { $('seq').innerHTML = ''; say(e.message, true); }
}

function attemptsTable(attempts) {
  if (attempts.length === 0) return '<p class="empty">No attempt yet.</p>';
  return '<table>' + head(['round', '#', 'started', 'duration', 'result', 'response body']) + attempts.map((a) => row([esc(a.round), esc(a.number),
    esc(when(a.startedAt)), esc(durationText(a.durationMs)),
    a.error ? '<span class="bad">' + esc(a.error) + '</span>' : '<span class="ok">HTTP ' + esc(a.outcome.status) + '</span>',
    a.outcome.kind === 'response' && a.outcome.body ? '<code>' + esc(a.outcome.body.slice(0, 500)) + '</code>' : ''], 'data-attempt')).join('') + '</table>';
}
async function detail(id) {
  const [delivery, attempts] = await Promise.all([api('/v1/deliveries/' + encodeURIComponent(id)), api('/v1/deliveries/' + encodeURIComponent(id) + '/attempts')]);
  return { delivery, attempts: attempts.data };
}
async function showTest() {
  const { delivery, attempts } = await detail(testWatch.deliveryId);
  const done = delivery.status === 'delivered' || delivery.status === 'dead';
  $('test-result').innerHTML = '<h3>Test event <code>' + esc(testWatch.eventId) + '</code> to <code>' + esc(delivery.endpointId) + '</code>: <span id="test-status" class="' +
    (delivery.status === 'delivered' ? 'ok' : delivery.status === 'dead' ? 'bad' : 'warn') + '">' + esc(delivery.status) + '</span></h3>' + attemptsTable(attempts);
  if (done) testWatch = null;
}

document.addEventListener('click', async (ev) => {
  const t = ev.target; if (!(t instanceof HTMLElement)) return;
  try {
    if (t.dataset.replay) {
      await api('/v1/dead-letters/' + encodeURIComponent(t.dataset.replay) + '/replay', { method: 'POST' });
      say('Replayed ' + t.dataset.replay + ': it is sent again now, with the same webhook-id.'); refresh(); setTimeout(refresh, 700);
    } else if (t.dataset.test) {
      const sent = await api('/v1/endpoints/' + encodeURIComponent(t.dataset.test) + '/test', { method: 'POST' });
      testWatch = { eventId: sent.id, deliveryId: sent.deliveryId };
      say('Sent a test event (' + sent.type + ') to ' + t.dataset.test + '.'); await showTest();
      for (const ms of [300, 1000, 2500]) setTimeout(() => testWatch && showTest().catch(() => {}), ms);
    } else if (t.dataset.rotate) {
      if (!confirm('Rotate the secret of ' + t.dataset.rotate + '? The old one keeps signing for a while.')) return;
      const r = await api('/v1/endpoints/' + encodeURIComponent(t.dataset.rotate) + '/rotate-secret', { method: 'POST' });
      showSecret(r.id, r.secret);
      say('New secret for ' + r.id + (r.previousSecretExpiresAt ? '; the previous one keeps signing until ' + when(r.previousSecretExpiresAt) + ' UTC' : '') + '.');
      $('verify').scrollIntoView();
    } else if (t.dataset.enable || t.dataset.disable) {
      const id = t.dataset.enable || t.dataset.disable;
      await api('/v1/endpoints/' + encodeURIComponent(id) + '/' + (t.dataset.enable ? 'enable' : 'disable'), { method: 'POST' });
      say((t.dataset.enable ? 'Enabled ' : 'Disabled ') + id + '.'); refresh();
    } else if (t.dataset.filterEdit) {
      const e = await api('/v1/endpoints/' + encodeURIComponent(t.dataset.filterEdit));
      filterFor = e.id; $('filter-of').textContent = e.id; $('filter-result').textContent = '';
      $('filter-form').elements.filter.value = e.filter ? JSON.stringify(e.filter, null, 2) : '';
      $('filter-form').hidden = false; $('filter-form').scrollIntoView();
    } else if (t.id === 'filter-save' || t.id === 'filter-remove') {
      const text = t.id === 'filter-remove' ? '' : $('filter-form').elements.filter.value.trim();
      const e = await api('/v1/endpoints/' + encodeURIComponent(filterFor), { method: 'PATCH', body: JSON.stringify({ filter: text ? parsed(text, 'The filter') : null }) });
      $('filter-form').elements.filter.value = e.filter ? JSON.stringify(e.filter, null, 2) : '';
      say(e.filter ? 'Saved the filter of ' + e.id + '.' : 'Removed the filter of ' + e.id + ': it gets every event of its event types.'); refresh();
    } else if (t.id === 'filter-try') {
      const f = $('filter-form').elements; const text = f.filter.value.trim();
      const body = { payload: parsed(f.payload.value, 'The payload'), filter: text ? parsed(text, 'The filter') : null };
      if (f.type.value.trim()) body.type = f.type.value.trim();
      const r = await api('/v1/endpoints/' + encodeURIComponent(filterFor) + '/filter-test', { method: 'POST', body: JSON.stringify(body) });
      $('filter-result').className = r.matches ? 'ok' : 'bad';
      $('filter-result').textContent = r.matches ? 'Matches: this event would be sent.' : 'Does not match: ' + r.failed + ' failed.';
    } else if (t.id === 'filter-close') {
      $('filter-form').hidden = true;
    } else if (t.dataset.seq) {
      $('seq-form').elements.endpointId.value = t.dataset.seq; await sequence(); $('sequence').scrollIntoView();
    } else if (t.dataset.log) {
      $('search').elements.endpointId.value = t.dataset.log; await search(true); $('log').scrollIntoView();
    } else if (t.dataset.detail) {
      const { delivery, attempts } = await detail(t.dataset.detail);
      $('detail').innerHTML = '<h3>Delivery <code>' + esc(delivery.id) + '</code> · ' + esc(delivery.eventType) + ' · <code>' + esc(delivery.eventId) + '</code></h3>' +
        '<div class="muted">Payload sent (the body of every attempt):</div><pre id="payload">' +
        esc(delivery.payload === null ? '(no longer kept)' : pretty(delivery.payload)) + '</pre>' + attemptsTable(attempts);
    }
  } catch (e) { say(e.message, true); }
});
$('search').addEventListener('submit', (ev) => { ev.preventDefault(); search(true); });
$('filter-form').addEventListener('submit', (ev) => ev.preventDefault());
$('seq-form').addEventListener('submit', (ev) => { ev.preventDefault(); sequence(); });
$('seq-more').addEventListener('click', () => sequence(true));
$('login').addEventListener('submit', (ev) => { ev.preventDefault(); sessionStorage.setItem('heraldPortalToken', $('token').value.trim()); $('token').value = ''; say(''); showLogin(); refresh(); });
$('logout').addEventListener('click', () => { sessionStorage.removeItem('heraldPortalToken'); showLogin(); say('Signed out.'); });
$('snippet').textContent = snippet(null);
deliveryCharts.start({ api, onError: (e) => say(e.message, true) });
showLogin(); refresh();
setInterval(() => token() && refresh(), 5000);
</script></body></html>`;

export function portalHtml(): string {
  return PAGE;
}
