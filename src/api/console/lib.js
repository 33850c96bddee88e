// svc console: shared helpers. Data is only ever inserted as text (Node.append of strings,
// textContent); attribute names and URLs are the console's own.

const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content ?? '';
export const csrf = meta('csrf-token');
/** The shell marks the caller's scope; read-scope pages create no write control. */
export const admin = meta('svc-scope') === 'admin';

export class ApiError extends Error {
  constructor(status, message, body) { super(message); this.status = status; this.body = body; }
}

/** Calls /api/v1/<path>; the parsed JSON, or throws ApiError with the server's message. */
export async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin' };
  if (method !== 'GET') {
    headers['X-CSRF-Token'] = csrf;
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  }
  const r = await fetch('/api/v1/' + path, init);
  let data = null;
  try { data = await r.json(); } catch { data = null; }
  if (!r.ok) throw new ApiError(r.status, (data && data.error) || `HTTP ${r.status}`, data);
  return data;
}
export const post = (path, body = {}) => api(path, { method: 'POST', body });

/** Builds an element; strings among the children become text nodes, never markup. */
export function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked') e[k] = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  add(e, kids);
  return e;
}
function add(e, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : String(k));
  }
}

/** Replaces the page's content. */
export function mount(...nodes) { document.getElementById('app').replaceChildren(...nodes.flat().filter(Boolean)); }
export const section = (title, ...kids) => h('section', {}, h('h2', {}, title), ...kids);
export const muted = (t) => h('span', { class: 'muted' }, t);
export const errorText = (e) => h('p', { class: 'error', role: 'alert' }, e instanceof Error ? e.message : String(e));

/** A section filled once `load` resolves; a failure shows the server's message in place. */
export function lazy(title, load) {
  const box = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  const s = section(title, box);
  const run = async () => {
    try { box.replaceChildren(...[await load(run)].flat().filter(Boolean)); } catch (e) { box.replaceChildren(errorText(e)); }
  };
  s.done = run();
  return s;
}

const fmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
/** An instant in the browser's zone; the UTC instant on hover. */
export function time(iso) {
  if (!iso) return muted('—');
  const d = new Date(String(iso).replace(/(\.\d{3})\d+/, '$1'));
  if (Number.isNaN(d.getTime())) return h('span', {}, iso);
  return h('time', { datetime: iso, title: d.toISOString().replace('.000Z', 'Z') }, fmt.format(d));
}

export function sev(label) {
  const l = String(label || '').toLowerCase();
  return h('span', { class: `sev sev-${l}` }, String(label || ''));
}
export const state = (s) => h('span', { class: `state st-${String(s).toLowerCase()}` }, String(s));

/** Key/value list: pairs of [label, value]. */
export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v ?? '—')]));
}

/**
 * A table of `rows`; columns `{label, get(row), wide?}` (`wide`: long text that may break
 * anywhere); narrow screens show labelled cards.
 */
export function table(cols, rows, { empty = 'Nothing to show.', rowAttrs } = {}) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', rowAttrs ? rowAttrs(r) : {},
      cols.map((c) => h('td', { 'data-label': c.label || null, class: c.wide ? 'wide' : null }, c.get(r)))))));
}

/**
 * A button for a change: none at all for read-scope callers. `confirm` arms it on the
 * first press (no dialogs); `run` gets the button and is awaited with the button disabled.
 */
export function action(label, run, { confirm, danger, attrs = {} } = {}) {
  if (!admin) return null;
  let armed = false;
  const b = h('button', { type: 'button', class: danger ? 'write danger' : 'write', ...attrs }, label);
  b.addEventListener('click', async () => {
    if (confirm && !armed) {
      armed = true; b.textContent = confirm;
      setTimeout(() => { armed = false; b.textContent = label; }, 5000);
      return;
    }
    armed = false; b.textContent = label; b.disabled = true;
    try { await run(b); } catch (e) { toast(e.message, null, true); } finally { b.disabled = false; }
  });
  return b;
}

/** A short message at the bottom of the page, with an optional action button. */
export function toast(text, act, isError) {
  let box = document.getElementById('toasts');
  if (!box) { box = h('div', { id: 'toasts', role: 'status', 'aria-live': 'polite' }); document.body.append(box); }
  const t = h('div', { class: isError ? 'toast error' : 'toast' }, h('span', {}, text), act);
  box.append(t);
  setTimeout(() => t.remove(), act ? 30000 : 8000);
  return t;
}

/** The page's query string (filters live in the URL so a link can be shared). */
export const query = new URLSearchParams(location.search);
/** The query string of `obj` without empty values. */
export function qs(obj) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}

/** A GET form over the page's own URL: fields `{name, label, type?, options?}`. */
export function filters(fields) {
  return h('form', { class: 'filters', method: 'get', action: location.pathname },
    fields.map((f) => h('label', {}, f.label, f.options
      ? h('select', { name: f.name }, f.options.map(([v, t]) => h('option', { value: v, selected: (query.get(f.name) ?? '') === v }, t)))
      : h('input', { name: f.name, type: f.type || 'text', value: query.get(f.name) ?? '', placeholder: f.placeholder, size: f.size }))),
    h('button', { type: 'submit' }, 'Apply'));
}

/** Previous / next links for an envelope `{total, offset, limit}`. */
export function pager(env) {
  const { offset = 0, limit = 0, total } = env;
  const link = (o, t) => {
    const q = new URLSearchParams(location.search); q.set('offset', String(Math.max(0, o)));
    return h('a', { href: location.pathname + '?' + q }, t);
  };
  const end = offset + (env.items ? env.items.length : 0);
  return h('div', { class: 'pager' },
    offset > 0 ? link(offset - limit, '← Newer') : null,
    h('span', { class: 'muted' }, `${end ? offset + 1 : 0}–${end}` + (total !== undefined ? ` of ${total}` : '')),
    env.truncated ? link(offset + limit, 'Older →') : null);
}

/** A small inline form for a change: hidden for read-scope callers. */
export function changeForm(fields, label, run) {
  if (!admin) return null;
  const f = h('form', { class: 'inline' },
    fields.map((x) => h('label', {}, x.label, h('input', { name: x.name, type: x.type || 'text', required: x.required, placeholder: x.placeholder, size: x.size }))),
    h('button', { type: 'submit', class: 'write' }, label));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const btn = f.querySelector('button'); btn.disabled = true;
    try { await run(Object.fromEntries(new FormData(f)), f); } catch (e) { toast(e.message, null, true); } finally { btn.disabled = false; }
  });
  return f;
}

/** GeoIP fields (`country`, `country_name`, `city`, `asn`, `org`) as one line. */
export function geoText(g) {
  if (!g) return '—';
  return [g.country_name || g.country, g.city, g.asn ? `AS${g.asn}${g.org ? ' ' + g.org : ''}` : null].filter(Boolean).join(' · ') || '—';
}

export const num = (n) => (typeof n === 'number' ? n.toLocaleString() : n ?? '—');
export const yes = (b) => (b === true ? 'yes' : b === false ? 'no' : '—');
