// svc console: settings (admin): a form per section with values, defaults and their class
// (live: a reload applies it; restart: the daemon must restart); a save posts the changed
// keys as a flat object, refusals show beside their fields.
import { api, post, h, mount, errorText, toast, query, muted } from './lib.js';

const nav = h('nav', { class: 'filters', 'aria-label': 'Sections' });
const box = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
const title = h('h2', {}, 'Settings');

/** The typed value of a field, or undefined when it is unchanged. */
function valueOf(item, input) {
  const t = input.value;
  const shown = input.dataset.orig;
  if (input.type === 'checkbox') return input.checked === (shown === 'true') ? undefined : input.checked;
  if (t === shown) return undefined;
  // A value the type does not take goes as typed: the server names the field.
  if (item.type === 'integer' && t.trim() !== '' && !Number.isNaN(Number(t))) return Number(t);
  if (item.type.startsWith('array') || (item.type === 'command' && t.trim().startsWith('['))) { try { return JSON.parse(t); } catch { return t; } }
  return t;
}
const shownValue = (v) => (v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

async function restartDaemon(b) {
  const before = (await api('status')).started_at_token;
  await post('settings/restart');
  b.textContent = 'Restarting…';
  for (let i = 0; i < 120; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    try { if ((await api('status')).started_at_token !== before) { toast('The daemon is back'); return show(current); } } catch { /* still down */ }
  }
  toast('The daemon did not come back within two minutes', null, true);
}

const restartButton = () => h('button', { type: 'button', class: 'write danger', 'data-act': 'restart', onclick: (e) => { e.target.disabled = true; restartDaemon(e.target).catch((x) => toast(x.message, null, true)).finally(() => { e.target.disabled = false; }); } }, 'Restart daemon');

let current = '';
async function show(name) {
  current = name;
  title.textContent = name;
  nav.querySelectorAll('a').forEach((a) => { if (a.dataset.section === name) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current'); });
  box.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  let r;
  try { r = await api('settings/' + encodeURIComponent(name)); } catch (e) { box.replaceChildren(errorText(e)); return; }
  const items = r.items || [];
  const status = h('div', { id: 'settings-status', role: 'status' });
  const form = h('form', { class: 'settings', 'data-section': name },
    items.map((it) => {
      const v = shownValue(it.value);
      const input = it.type === 'boolean'
        ? h('input', { type: 'checkbox', name: it.key, checked: it.value === true, 'data-orig': String(it.value === true) })
        : h('input', { type: 'text', name: it.key, value: v, 'data-orig': v, placeholder: it.secret ? (it.set ? 'set (hidden)' : 'not set') : null, size: 24 });
      if (it.file_only) { input.disabled = true; input.readOnly = true; input.title = 'Set in svc.toml or a hand-written drop-in only'; }
      return h('div', { class: 'field', 'data-field': it.key },
        h('label', {}, h('code', {}, it.key), ' ', input),
        h('span', { class: `state st-${it.class}` }, it.class),
        h('span', { class: 'muted' }, ` ${it.type}${it.range ? ' ' + it.range : ''}; default ${shownValue(it.default) || '—'}`),
        it.doc ? h('p', { class: 'muted' }, it.doc) : null,
        h('p', { class: 'error field-error', hidden: true }));
    }),
    h('button', { type: 'submit', class: 'write' }, 'Save'), status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    form.querySelectorAll('.field-error').forEach((p) => { p.hidden = true; p.textContent = ''; });
    const changes = {};
    for (const it of items) {
      if (it.file_only) continue;
      const input = form.elements.namedItem(it.key);
      const v = input && valueOf(it, input);
      if (v !== undefined) changes[it.key] = v;
    }
    if (!Object.keys(changes).length) { status.replaceChildren(muted('Nothing changed.')); return; }
    const btn = form.querySelector('button[type=submit]'); btn.disabled = true;
    try {
      const res = await post('settings/' + encodeURIComponent(name), changes);
      const restart = res.restart_required || [];
      status.replaceChildren(h('p', {}, `Saved ${Object.keys(changes).join(', ')}; ${res.applied ? 'applied' : 'not applied by the reload'}.`),
        restart.length ? h('p', {}, `A restart applies: ${restart.join(', ')} `, restartButton()) : null);
      for (const [k, v] of Object.entries(changes)) { const i = form.elements.namedItem(k); if (i) i.dataset.orig = shownValue(v); }
    } catch (e) {
      const errs = (e.body && e.body.errors) || [];
      for (const x of errs) {
        const p = form.querySelector(`[data-field="${CSS.escape(x.field)}"] .field-error`);
        if (p) { p.textContent = x.message; p.hidden = false; }
      }
      status.replaceChildren(errorText(e));
    } finally { btn.disabled = false; }
  });
  box.replaceChildren(form);
}

async function start() {
  mount(nav, h('section', {}, title, box));
  try {
    const r = await api('settings');
    nav.replaceChildren(...(r.sections || []).map((s) => {
      const a = h('a', { href: '/settings?section=' + encodeURIComponent(s), 'data-section': s }, s);
      a.addEventListener('click', (ev) => { ev.preventDefault(); history.replaceState(null, '', a.href); show(s); });
      return a;
    }));
    if ((r.restart_required || []).length) nav.append(h('p', { class: 'muted' }, 'Waiting for a restart: ' + r.restart_required.join(', ') + ' ', restartButton()));
    const s = query.get('section');
    await show(s && r.sections.includes(s) ? s : r.sections[0]);
  } catch (e) { box.replaceChildren(errorText(e)); }
}
start();
