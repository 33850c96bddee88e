// svc console: active findings with filters, a detail drawer (enriched fields, GeoIP,
// block_ip), fixes (fix, dismiss, re-check, fix selected), scan jobs, and suppression.
import { api, post, h, mount, section, table, time, sev, kv, num, query, filters, pager, qs, admin, action, toast, changeForm, errorText, geoText, state, ApiError } from './lib.js';

const want = { severity: (query.get('severity') || '').toUpperCase(), check: query.get('check') || '', q: (query.get('q') || '').toLowerCase() };
const drawer = h('section', { class: 'drawer', id: 'drawer', hidden: true, tabindex: -1, 'aria-live': 'polite' });

async function open(f) {
  drawer.hidden = false;
  drawer.replaceChildren(h('h2', {}, 'Finding'), h('p', { class: 'loading' }, 'Loading…'));
  let d;
  try { d = await api('finding-detail' + qs({ check: f.check, message: f.message })); } catch (e) { drawer.replaceChildren(h('h2', {}, 'Finding'), errorText(e)); return; }
  const blockIp = typeof f.block_ip === 'string' ? f.block_ip : null;
  const close = h('button', { type: 'button' }, 'Close');
  close.addEventListener('click', () => { drawer.hidden = true; });
  // Arrays among the parts are flattened: replaceChildren would print them as text.
  drawer.replaceChildren(...[
    h('div', { class: 'row' }, h('h2', {}, f.check), sev(f.severity), close),
    kv([
      ['Id', h('code', {}, f.id)], ['Message', d.message], ['Details', h('pre', {}, d.details || '')],
      ['Account', d.account || f.account], ['Path', d.path], ['Address', d.ip ? h('a', { href: '/threat?ip=' + encodeURIComponent(d.ip) }, d.ip) : null],
      ['GeoIP', f.geo ? geoText(f.geo) : null], ['First seen', time(d.first_seen)], ['Last seen', time(d.last_seen)],
      ['Count', num(d.count)], ['Active', d.active ? 'yes' : 'no'], ['Suppressed', d.suppressed ? 'yes' : 'no'],
      ['Dispatches', num(d.dispatches_total)], ['What to do', d.fix || f.fix],
    ]),
    (d.actions || []).length ? [h('h3', {}, 'History of actions'), table([
      { label: 'Time', get: (a) => time(a.at) }, { label: 'Action', get: (a) => a.action || a.kind || '' },
      { label: 'By', get: (a) => a.actor || a.by || '' }, { label: 'Detail', wide: true, get: (a) => a.detail || a.reason || a.outcome || '' },
    ], d.actions)] : null,
    // block_ip: offered by the enriched route for findings whose address can be blocked.
    blockIp ? h('div', { class: 'row' }, action(`Block ${blockIp} for 24 h`, async () => {
      const r = await post('threat/block-ip', { ip: blockIp });
      toast(`Blocked ${r.ip} for 24 hours`);
    })) : null,
    remedy(f),
    admin ? [h('h3', {}, 'Suppress'), changeForm([
      { name: 'reason', label: 'Reason', required: true, size: 30 },
      { name: 'expires_hours', label: 'Hours (empty: until deleted)', type: 'number', size: 6 },
    ], 'Suppress findings like this', async (v) => {
      const body = { check: f.check, message: f.message, reason: v.reason };
      if (v.expires_hours) body.expires_hours = Number(v.expires_hours);
      const r = await post('suppressions', body);
      toast(`Suppression ${r.id} created; ${r.removed_active} active finding(s) removed`);
      load();
    })] : null,
  ].flat(Infinity).filter(Boolean));
  drawer.focus();
}

// Fixes (POST /api/v1/fix and friends): what a fix does comes from the enriched row.
const why = (e) => (e instanceof ApiError && e.status === 409 ? `Changed since detection, re-verify: ${e.message}` : e.message);
function remedy(f) {
  if (!admin) return null;
  const out = h('p', { class: 'muted', id: 'fix-result', role: 'status' });
  const say = (t, bad) => { out.textContent = t; out.className = bad ? 'error' : 'muted'; };
  const call = (path, done) => async () => {
    try { done(await post(path, { id: f.id })); load(); } catch (e) { say(why(e), true); }
  };
  return [h('h3', {}, 'Remedy'),
    f.fixable ? h('p', {}, 'Fix: ', f.fix_description || f.fix_action || '') : h('p', { class: 'muted' }, 'No automatic fix for this check.'),
    h('div', { class: 'row' },
      f.fixable ? action('Fix', call('fix', (r) => say(`Fixed: ${r.fixed.action} ${r.fixed.path || ''}${r.fixed.quarantine_id ? ' (quarantine ' + r.fixed.quarantine_id + ')' : ''}`)), { confirm: 'Press again to fix', attrs: { 'data-act': 'fix' } }) : null,
      action('Dismiss', call('dismiss', () => say('Dismissed (the host is unchanged).')), { confirm: 'Press again to dismiss', attrs: { 'data-act': 'dismiss' } }),
      action('Re-check', call('verify-finding', (r) => say(r.holds ? 'Still holds.' : 'No longer holds; resolved.')), { attrs: { 'data-act': 'verify' } })),
    out];
}

const picked = new Set();
function pickBox(f) {
  return h('input', { type: 'checkbox', class: 'write', 'aria-label': 'Select ' + f.id, checked: picked.has(f.id), onclick: (ev) => ev.stopPropagation(),
    onchange: (ev) => { if (ev.target.checked) picked.add(f.id); else picked.delete(f.id); const p = document.getElementById('picked'); if (p) p.textContent = picked.size ? `${picked.size} selected` : ''; } });
}
async function fixSelected() {
  if (!picked.size) { toast('Select fixable findings first', null, true); return; }
  let r;
  try { r = await post('fix-bulk', { ids: [...picked] }); } catch (e) { r = e.body || { fixed: [], failures: [{ id: '', error: why(e) }] }; }
  picked.clear();
  await load();
  const fails = r.failures || [];
  document.getElementById('picked')?.replaceWith(h('div', { id: 'picked' }, `${(r.fixed || []).length} fixed, ${fails.length} failed`,
    fails.length ? h('ul', { class: 'error' }, fails.map((x) => h('li', {}, `${x.id}: ${x.status ? x.status + ' ' : ''}${x.error}`))) : null));
}

// Scan jobs: start one, watch it through queued, running, done; cancel it.
const jobs = h('section', { id: 'jobs' });
let polling = null;
async function loadJobs() {
  let r;
  try { r = await api('scan-jobs'); } catch (e) { jobs.replaceChildren(h('h2', {}, 'Scan jobs'), errorText(e)); return; }
  const items = (r.items || []).slice(0, 5);
  const busy = items.some((j) => j.state === 'queued' || j.state === 'running');
  jobs.replaceChildren(h('h2', {}, 'Scan jobs'),
    h('div', { class: 'row' }, ['critical', 'deep', 'full'].map((k) => action(`Scan ${k}`, async () => {
      const j = await post('scan-jobs', { kind: k }); toast(`Scan job ${j.id} queued`); loadJobs();
    }, { attrs: { 'data-scan': k } }))),
    table([
      { label: 'Job', get: (j) => String(j.id) }, { label: 'Kind', get: (j) => j.kind + (j.account ? ' ' + j.account : '') },
      { label: 'State', get: (j) => [state(j.state), j.reason ? ' ' + j.reason : ''] }, { label: 'Requested', get: (j) => time(j.requested_at) },
      { label: 'Findings', get: (j) => num(j.findings) },
      { label: '', get: (j) => (j.state === 'queued' || j.state === 'running' ? action('Cancel', async () => { await post(`scan-jobs/${j.id}/cancel`); loadJobs(); }, { attrs: { 'data-cancel': j.id } }) : '') },
    ], items, { empty: 'No scan job yet.' }));
  clearTimeout(polling);
  if (busy) polling = setTimeout(load, 3000); // load() reads the jobs again
}

// Saved views (prefs/views, per credential): `{findings: {NAME: query string}}`.
const views = h('div', { class: 'row', id: 'views' });
async function loadViews() {
  let all = {};
  try { all = await api('prefs/views'); } catch { return; }
  const mine = (all && typeof all.findings === 'object' && all.findings) || {};
  views.replaceChildren(h('span', { class: 'muted' }, 'Saved views:'),
    ...Object.entries(mine).filter(([, q]) => typeof q === 'string').map(([name, q]) => h('a', { href: '/findings' + (q.startsWith('?') ? q : '') }, name)),
    changeForm([{ name: 'name', label: 'Save these filters as', required: true, size: 14 }], 'Save view', async (v) => {
      const fresh = await api('prefs/views');
      const next = { ...fresh, findings: { ...(fresh.findings || {}), [v.name]: location.search } };
      await post('prefs/views', next);
      toast(`View ${v.name} saved`);
      loadViews();
    }));
}

async function load() {
  const list = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  mount(
    filters([
      { name: 'severity', label: 'Severity', options: [['', 'any'], ['CRITICAL', 'critical'], ['HIGH', 'high'], ['WARNING', 'warning']] },
      { name: 'check', label: 'Check', size: 14 }, { name: 'q', label: 'Text', size: 18 },
    ]),
    views, jobs, drawer, section('Active findings', list));
  loadJobs();
  try {
    const r = await api('findings/enriched' + qs({ limit: 500, offset: query.get('offset') || '' }));
    const items = (r.items || []).filter((f) => (!want.severity || f.severity === want.severity) && (!want.check || f.check === want.check)
      && (!want.q || [f.id, f.message, f.details, f.path, f.ip, f.account].some((x) => String(x || '').toLowerCase().includes(want.q))));
    const sc = r.severity_counts || {};
    // The check names of the active set, offered as suggestions for the check filter.
    const names = h('datalist', { id: 'check-names' }, Object.keys(r.check_types || {}).map((c) => h('option', { value: c })));
    document.querySelector('input[name=check]')?.setAttribute('list', 'check-names');
    list.replaceChildren(
      names,
      h('p', { class: 'muted' }, `${num(r.total)} active (critical ${sc.critical ?? 0}, high ${sc.high ?? 0}, warning ${sc.warning ?? 0}); ${items.length} shown. Select a row for details.`),
      admin ? h('div', { class: 'row' }, action('Fix selected', fixSelected, { attrs: { 'data-act': 'fix-bulk' } }), h('span', { class: 'muted', id: 'picked' }, '')) : null,
      table([
        admin ? { label: 'Select', get: (f) => (f.fixable ? pickBox(f) : '') } : null,
        { label: 'Severity', get: (f) => sev(f.severity) }, { label: 'Check', get: (f) => f.check },
        { label: 'Message', wide: true, get: (f) => f.message }, { label: 'Account', get: (f) => f.account || '' },
        { label: 'Last seen', get: (f) => time(f.last_seen) }, { label: 'Count', get: (f) => num(f.count) },
        { label: 'Id', get: (f) => h('code', {}, f.id || '') },
      ].filter(Boolean), items, {
        empty: 'No active finding matches.',
        rowAttrs: (f) => ({ class: 'pick', tabindex: 0, onclick: () => open(f), onkeydown: (ev) => { if (ev.key === 'Enter') open(f); } }),
      }),
      pager(r));
  } catch (e) { list.replaceChildren(errorText(e)); }
}
load();
loadViews();
