/**
 * The dashboard at `GET /`: one static page that reads the admin API with the
 * token the operator enters (kept in the browser's session storage). No build
 * step; the page is plain HTML and JavaScript.
 */
const PAGE = String.raw`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Herald</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:14px system-ui,sans-serif;margin:2rem;color:#222}
 table{border-collapse:collapse;margin:.5rem 0 1.5rem}
 td,th{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:left;vertical-align:top}
 .bad{color:#b00020}.ok{color:#0a7d2c}code{font-size:12px}
</style></head><body>
<h1>Herald</h1>
<form id="login"><label>Admin token <input id="token" type="password" size="40"></label> <button>Use</button></form>
<p id="msg"></p>
<h2>Endpoints</h2><table id="endpoints"></table>
<h2>Dead letters</h2><table id="dead"></table>
<script>
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { authorization: 'Bearer ' + sessionStorage.getItem('heraldToken'), 'content-type': 'application/json' } });
  const body = res.status === 204 ? null : await res.json();
  if (!res.ok) throw new Error(body?.error?.message ?? res.statusText);
  return body;
}
async function refresh() {
  try {
    const [endpoints, dead, status] = await Promise.all([api('/v1/endpoints'), api('/v1/dead-letters'), api('/v1/status')]);
    const actors = new Map(status.actors.map((a) => [a.endpointId, a]));
    $('endpoints').innerHTML = '<tr><th>id</th><th>tenant</th><th>url</th><th>status</th><th>breaker</th><th>last error</th></tr>' +
      endpoints.data.map((e) => '<tr><td><code>' + esc(e.id) + '</code></td><td>' + esc(e.tenantId) + '</td><td>' + esc(e.url) +
        '</td><td class="' + (e.status === 'enabled' ? 'ok' : 'bad') + '">' + esc(e.status) + '</td><td>' + esc(actors.get(e.id)?.breaker ?? 'closed') +
        '</td><td>' + esc(actors.get(e.id)?.lastError ?? '') + '</td></tr>').join('');
    $('dead').innerHTML = '<tr><th>when</th><th>endpoint</th><th>event</th><th>reason</th><th></th></tr>' +
      dead.data.map((d) => '<tr><td>' + new Date(d.createdAt).toISOString() + '</td><td><code>' + esc(d.endpointId) + '</code></td><td>' +
        esc(d.eventType) + ' <code>' + esc(d.eventId) + '</code></td><td class="bad">' + esc(d.reason) +
        '</td><td><button data-id="' + esc(d.id) + '">Replay</button></td></tr>').join('');
    $('msg').textContent = '';
  } catch (e) { $('msg').textContent = e.message; }
}
$('dead').addEventListener('click', async (ev) => {
  const id = ev.target?.dataset?.id; if (!id) return;
  try { await api('/v1/dead-letters/' + encodeURIComponent(id) + '/replay', { method: 'POST' }); $('msg').textContent = 'Replayed ' + id; refresh(); }
  catch (e) { $('msg').textContent = e.message; }
});
$('login').addEventListener('submit', (ev) => { ev.preventDefault(); sessionStorage.setItem('heraldToken', $('token').value); refresh(); });
if (sessionStorage.getItem('heraldToken')) refresh();
setInterval(() => sessionStorage.getItem('heraldToken') && refresh(), 5000);
</script></body></html>`;

export function dashboardHtml(): string {
  return PAGE;
}
