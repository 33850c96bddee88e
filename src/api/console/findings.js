// svc console: active findings with filters, a detail drawer (enriched fields, GeoIP,
// block_ip), and suppression.
import { api, post, h, mount, section, table, time, sev, kv, num, query, filters, pager, qs, admin, action, toast, changeForm, errorText, geoText } from './lib.js';

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
  drawer.replaceChildren(
    h('div', { class: 'row' }, h('h2', {}, f.check), sev(f.severity), close),
    kv([
      ['Message', d.message], ['Details', h('pre', {}, d.details || '')],
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
    // Hook for the remediation issue's fix and dismiss actions: not on this build's routes.
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
  );
  drawer.focus();
}

async function load() {
  const list = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  mount(
    filters([
      { name: 'severity', label: 'Severity', options: [['', 'any'], ['CRITICAL', 'critical'], ['HIGH', 'high'], ['WARNING', 'warning']] },
      { name: 'check', label: 'Check', size: 14 }, { name: 'q', label: 'Text', size: 18 },
    ]),
    drawer, section('Active findings', list));
  try {
    const r = await api('findings/enriched' + qs({ limit: 500, offset: query.get('offset') || '' }));
    const items = (r.items || []).filter((f) => (!want.severity || f.severity === want.severity) && (!want.check || f.check === want.check)
      && (!want.q || [f.message, f.details, f.path, f.ip, f.account].some((x) => String(x || '').toLowerCase().includes(want.q))));
    const sc = r.severity_counts || {};
    // The check names of the active set, offered as suggestions for the check filter.
    const names = h('datalist', { id: 'check-names' }, Object.keys(r.check_types || {}).map((c) => h('option', { value: c })));
    document.querySelector('input[name=check]')?.setAttribute('list', 'check-names');
    list.replaceChildren(
      names,
      h('p', { class: 'muted' }, `${num(r.total)} active (critical ${sc.critical ?? 0}, high ${sc.high ?? 0}, warning ${sc.warning ?? 0}); ${items.length} shown. Select a row for details.`),
      table([
        { label: 'Severity', get: (f) => sev(f.severity) }, { label: 'Check', get: (f) => f.check },
        { label: 'Message', wide: true, get: (f) => f.message }, { label: 'Account', get: (f) => f.account || '' },
        { label: 'Last seen', get: (f) => time(f.last_seen) }, { label: 'Count', get: (f) => num(f.count) },
      ], items, {
        empty: 'No active finding matches.',
        rowAttrs: (f) => ({ class: 'pick', tabindex: 0, onclick: () => open(f), onkeydown: (ev) => { if (ev.key === 'Enter') open(f); } }),
      }),
      pager(r));
  } catch (e) { list.replaceChildren(errorText(e)); }
}
load();
