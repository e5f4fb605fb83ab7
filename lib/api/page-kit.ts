/**
 * What Herald's two pages (the operator dashboard, `dashboard.ts`, and the tenants' portal,
 * `portal.ts`) share: the base style and the small script helpers every view uses. Each page
 * keeps its own header colour, layout and views; a token is kept under a key of each page's own,
 * so signing in to one does not sign in to the other in the same tab.
 */

/** The base style: colours, the layout of header, sections, tables and forms. A page adds its own rules after it. */
export const PAGE_CSS = String.raw` [hidden]{display:none!important}
 :root{--bad:#b00020;--ok:#0a7d2c;--warn:#9a6700;--line:#e3e3e3;--muted:#666}
 body{font:14px system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
 header{color:#fff;padding:.7rem 1.5rem;display:flex;gap:1.5rem;align-items:center;flex-wrap:wrap}
 header h1{font-size:1.2rem;margin:0}
 main{padding:1rem 1.5rem;max-width:1400px}
 .pager{display:flex;gap:.8rem;align-items:center;margin:.4rem 0}`;

/** Rows a paged list shows at once (dead letters, the delivery log). */
export const PAGE_ROWS = 50;

/**
 * A paged list's controls, for the `pager` of {@link pageKitScript} named `name`: Newer (back a
 * page), where the list is, and Older (the next page, through the API's cursor).
 */
export function pagerMarkup(name: string): string {
  return `<p class="pager" id="${name}-pager"><button id="${name}-newer" hidden>← Newer</button><span id="${name}-at" class="muted"></span><button id="${name}-older" hidden>Older →</button></p>`;
}

/**
 * `durationText(ms)` as script text: the pages show a duration as the CLI and the logs do
 * (lib/clock.ts's `durationText`, which a spec holds this to).
 */
export const DURATION_TEXT_SCRIPT = String.raw`const durationText = (ms) => {
  if (!Number.isFinite(ms)) return String(ms);
  const whole = Math.floor(Math.max(0, ms));
  if (whole < 1000) return whole + ' ms';
  if (whole < 10000) return Math.floor(whole / 100) / 10 + ' s';
  const units = [[86400000, 'd'], [3600000, 'h'], [60000, 'min'], [1000, 's']];
  const i = units.findIndex(([unitMs]) => whole >= unitMs), [largeMs, largeName] = units[i], small = units[i + 1];
  const rest = small ? Math.floor((whole % largeMs) / small[0]) : 0;
  return Math.floor(whole / largeMs) + ' ' + largeName + (rest > 0 ? ' ' + rest + ' ' + small[1] : '');
};`;

/**
 * The helpers, as script text: `$` (by id), `esc` (HTML-escapes anything the API returned),
 * `when` (epoch ms as UTC), `durationText` ({@link DURATION_TEXT_SCRIPT}), `clientCert` (an endpoint's client
 * certificate as a line under its URL), `token`, `say` (the
 * status line), `row` and `head` (table rows), `api` (a call with the bearer token; a 401
 * forgets the token and shows the page's `showLogin()`), `signingText` (an endpoint's signing
 * keys: each scheme, an ed25519 key's public key, a previous key's expiry), and `pager`: a list
 * shown one page at a time (see below).
 */
export function pageKitScript(tokenKey: string): string {
  const key = JSON.stringify(tokenKey);
  return String.raw`const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const when = (ms) => ms == null ? '' : new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
${DURATION_TEXT_SCRIPT}
// An endpoint's client certificate (its subject's first part and expiry, never a key): red once expired, amber within 30 days, by the browser's clock.
const clientCert = (tls) => {
  if (!tls) return '';
  const left = tls.notAfter - (performance.timeOrigin + performance.now());
  const cls = left <= 0 ? 'bad' : left < 30 * 864e5 ? 'warn' : 'muted';
  return '<br><small class="' + cls + '" data-client-cert>mTLS ' + esc(String(tls.subject).split('\n')[0]) + ' · ' + (left <= 0 ? 'expired ' : 'expires ') + esc(when(tls.notAfter)) + '</small>';
};
const token = () => sessionStorage.getItem(${key});
const say = (text, bad) => { $('msg').textContent = text; $('msg').className = bad ? 'bad' : 'ok'; };
const row = (cells, attrs = '') => '<tr ' + attrs + '>' + cells.map((c) => '<td>' + c + '</td>').join('') + '</tr>';
const head = (names) => '<tr>' + names.map((n) => '<th>' + esc(n) + '</th>').join('') + '</tr>';
const signingText = (e) => (e.signingKeys ?? []).map((k) => esc(k.scheme) + (k.publicKey ? ' <code class="public-key">' + esc(k.publicKey) + '</code>' : '') +
  (k.expiresAt != null ? ' <span class="muted">until ' + esc(when(k.expiresAt)) + '</span>' : '')).join('<br>');
// An endpoint's custom headers by name (a secret value as ***: the API never returns it) and its kind of auth, as a small line.
const sentText = (e) => { const sent = [...Object.entries(e.headers ?? {}).map(([n, h]) => n + ': ' + (h.secret ? '***' : h.value)), ...(e.auth ? ['auth: ' + e.auth.type] : [])];
  return sent.length ? '<br><small class="muted sent">' + esc(sent.join(' · ')) + '</small>' : ''; };
async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: { authorization: 'Bearer ' + token(), 'content-type': 'application/json' } });
  const body = res.status === 204 ? null : await res.json();
  if (res.status === 401) { sessionStorage.removeItem(${key}); showLogin(); }
  if (!res.ok) throw new Error(body?.error?.message ?? res.statusText);
  return body;
}
// A list the API pages with a cursor ({data, nextCursor}), shown one page at a time with the controls
// of pagerMarkup(name): Older follows nextCursor, Newer goes back to the page before (its cursor kept
// on a stack, as the API pages one way only). load(true) starts again from the newest with the
// query path() gives then (a new filter); load() reloads the page shown (a refresh keeps the place).
function pager(name, limit, path, render) {
  const p = { cursors: [null], next: null, query: null };
  p.load = async (reset) => {
    if (reset || p.query === null) { p.cursors = [null]; p.query = path(); }
    const cursor = p.cursors[p.cursors.length - 1];
    const sep = p.query.includes('?') ? '&' : '?';
    const page = await api(p.query + sep + 'limit=' + limit + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    // A later page emptied meanwhile (its rows replayed, purged): show the one before instead.
    if (page.data.length === 0 && p.cursors.length > 1) { p.cursors.pop(); return p.load(); }
    p.next = page.nextCursor;
    render(page.data);
    $(name + '-older').hidden = !p.next; $(name + '-newer').hidden = p.cursors.length === 1;
    $(name + '-at').textContent = p.cursors.length === 1 && !p.next ? '' : 'page ' + p.cursors.length;
    return page;
  };
  $(name + '-older').addEventListener('click', () => { if (p.next) { p.cursors.push(p.next); p.load().catch((e) => say(e.message, true)); } });
  $(name + '-newer').addEventListener('click', () => { if (p.cursors.length > 1) { p.cursors.pop(); p.load().catch((e) => say(e.message, true)); } });
  return p;
}`;
}
