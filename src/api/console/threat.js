// svc console: threat intelligence. IP lookup with composite score and sources, 24-hour
// and permanent blocks singly or over a selection with an undo toast, top attackers with
// GeoIP, attack-type and hourly charts, whitelist management.
import { api, post, h, mount, section, lazy, kv, table, time, state, num, admin, action, toast, changeForm, query, filters, muted, geoText } from './lib.js';
import { bars, hbars, hourLabel } from './chart.js';

/** Runs a change and offers its undo in a toast. */
async function change(route, body, what, after) {
  const r = await post(route, body);
  const undo = r.undo_token
    ? h('button', { type: 'button', class: 'write', 'data-undo': r.undo_token }, 'Undo')
    : null;
  if (undo) {
    undo.addEventListener('click', async () => {
      undo.disabled = true;
      try {
        const u = await post('undo/run', { undo_token: r.undo_token });
        toast(`Undone: ${u.action} (${num((u.restored || []).length ?? u.restored)} restored)`);
        undo.closest('.toast')?.remove();
        after?.();
      } catch (e) { toast(e.message, null, true); undo.disabled = false; }
    });
  }
  const extra = r.changed !== undefined ? ` (${num(r.changed?.length ?? r.changed)} changed)` : '';
  toast(`${what}${extra}`, undo);
  after?.();
  return r;
}

function lookup() {
  const ip = query.get('ip') || '';
  const form = filters([{ name: 'ip', label: 'IP address', placeholder: '203.0.113.7' }]);
  if (!ip) return section('IP lookup', form);
  return lazy('IP lookup', async (reload) => {
    const r = await api('threat/ip?ip=' + encodeURIComponent(ip));
    const acts = h('div', { class: 'row' },
      action('Block 24 h', () => change('threat/block-ip', { ip: r.ip }, `Blocked ${r.ip} for 24 hours`, reload), { attrs: { 'data-act': 'block' } }),
      action('Block permanently', () => change('threat/block-ip-permanent', { ip: r.ip }, `Blocked ${r.ip} permanently`, reload), { confirm: 'Confirm permanent block', danger: true, attrs: { 'data-act': 'block-permanent' } }),
      action('Whitelist', () => change('threat/whitelist-ip', { ip: r.ip }, `Whitelisted ${r.ip}`, reload)),
      action('Clear score', () => change('threat/clear-ip', { ip: r.ip }, `Cleared ${r.ip}`, reload), { confirm: 'Confirm clear' }));
    return [form,
      kv([
        ['Address', r.ip],
        ['Verdict', state(r.verdict)],
        ['Composite score', h('strong', {}, String(r.score ?? '—'))],
        ['Blocked', r.blocked ? 'yes' : 'no'],
        ['Whitelisted', r.whitelisted ? 'yes' : 'no'],
        ['Flagged', r.flagged ? 'yes (permanent evidence)' : 'no'],
        ['GeoIP', geoText(r.geo)],
        ['First / last seen', r.record ? [time(r.record.first_seen), ' – ', time(r.record.last_seen)] : '—'],
      ]),
      acts,
      h('h3', {}, 'Sources'),
      table([
        { label: 'Source', get: (s) => s.name },
        { label: 'Status', get: (s) => state(s.status) },
        { label: 'Score', get: (s) => (s.score === null ? '—' : String(s.score)) },
        { label: 'Weight', get: (s) => `${s.weight}%` },
        { label: 'Reason', wide: true, get: (s) => s.reason || '' },
      ], r.sources || []),
      h('h3', {}, 'Recent events'),
      table([
        { label: 'Time', get: (e) => time(e.at) },
        { label: 'Type', get: (e) => e.type_label || e.type },
        { label: 'Check', get: (e) => e.check },
        { label: 'Message', wide: true, get: (e) => e.message },
      ], r.events || [], { empty: 'No events.' })];
  });
}

function attackers() {
  return lazy('Top attackers', async () => {
    const r = await api('threat/top-attackers?limit=50');
    const items = r.items || [];
    const picked = new Set();
    const pick = (a) => (admin
      ? h('input', { type: 'checkbox', class: 'write', 'aria-label': `select ${a.ip}`, onchange: (ev) => (ev.target.checked ? picked.add(a.ip) : picked.delete(a.ip)) })
      : null);
    const bulk = (route, what) => async () => {
      if (!picked.size) { toast('Select addresses first.', null, true); return; }
      await change(route, { ips: [...picked] }, `${what} ${picked.size} address(es)`);
    };
    const cols = [
      { label: 'Address', get: (a) => h('a', { href: '/threat?ip=' + encodeURIComponent(a.ip) }, a.ip) },
      { label: 'Score', get: (a) => String(a.score) },
      { label: 'Events', get: (a) => num(a.events) },
      { label: 'Types', get: (a) => Object.entries(a.types || {}).map(([k, v]) => `${k} ${v}`).join(', ') },
      { label: 'GeoIP', get: (a) => geoText(a.geo) },
      { label: 'Last seen', get: (a) => time(a.last_seen) },
    ];
    if (admin) cols.unshift({ label: 'Select', get: pick });
    return [
      admin ? h('div', { class: 'row' },
        action('Block selection 24 h', bulk('threat/block-ip', 'Blocked for 24 hours:')),
        action('Block selection permanently', bulk('threat/block-ip-permanent', 'Blocked permanently:'), { confirm: 'Confirm permanent blocks', danger: true })) : null,
      table(cols, items, { empty: 'No attackers recorded.' }),
    ];
  });
}

function charts() {
  return lazy('Attack statistics', async () => {
    const r = await api('threat/stats');
    return [
      kv([
        ['Addresses', num(r.total_addresses)], ['Events', num(r.total_events)], ['Events (24 h)', num(r.events_24h)],
        ['Suspicious / malicious', `${num(r.suspicious_addresses)} / ${num(r.malicious_addresses)}`],
        ['Automatic blocking', r.auto_block ? (r.auto_block.active ? 'active' : `off${r.auto_block.reason ? ': ' + r.auto_block.reason : ''}`) : '—'],
      ]),
      h('h3', {}, 'Attack types'),
      hbars((r.by_type || []).map((t) => [t.label, t.events]), { name: 'events per attack type' }),
      h('h3', {}, 'Hourly trend (24 h)'),
      bars(r.hourly || [], ['count'], (b) => hourLabel(b.start), { name: 'attack events per hour' }),
    ];
  });
}

function whitelist() {
  return lazy('Whitelist', async (reload) => {
    const r = await api('threat/whitelist');
    return [
      changeForm([{ name: 'ip', label: 'Address or range', required: true }, { name: 'hours', label: 'Hours (empty: permanent)', type: 'number', size: 6 }], 'Whitelist', async (v) => {
        if (v.hours) await change('threat/temp-whitelist-ip', { ip: v.ip.trim(), hours: Number(v.hours) }, `Whitelisted ${v.ip} for ${v.hours} h`, reload);
        else await change('threat/whitelist-ip', { ip: v.ip.trim() }, `Whitelisted ${v.ip}`, reload);
      }),
      table([
        { label: 'Address', get: (w) => w.ip },
        { label: 'Reason', wide: true, get: (w) => w.reason || '' },
        { label: 'Added', get: (w) => time(w.created_at) },
        { label: 'Expires', get: (w) => (w.permanent ? 'never' : time(w.expires_at)) },
        { label: '', get: (w) => action('Remove', async () => { await change('threat/unwhitelist-ip', { ip: w.ip }, `Removed ${w.ip} from the whitelist`, reload); }) },
      ], r.items || [], { empty: 'No whitelisted addresses.' }),
    ];
  });
}

/** The caller's undoable changes, for when the toast is gone. */
function pending() {
  return lazy('Recent changes', async (reload) => {
    const r = await api('undo/pending');
    return table([
      { label: 'Time', get: (u) => time(u.created_at) }, { label: 'Action', get: (u) => u.action },
      { label: 'Addresses', wide: true, get: (u) => (u.ips || []).join(', ') + (u.count > (u.ips || []).length ? ` (+${u.count - u.ips.length})` : '') },
      { label: 'Undo until', get: (u) => time(u.expires_at) },
      { label: '', get: (u) => (u.valid ? action('Undo', async () => {
        const x = await post('undo/run', { undo_token: u.undo_token });
        toast(`Undone: ${x.action}`); reload();
      }) : h('span', { class: 'muted' }, u.invalidated_by ? `superseded by a later decision on ${u.invalidated_by}` : 'no longer valid')) },
    ], r.items || [], { empty: 'No change to undo.' });
  });
}

mount(
  admin ? lookup() : section('IP lookup', muted('Address lookups need an admin session.')),
  h('div', { class: 'grid' }, charts(), attackers()),
  admin ? whitelist() : null,
  admin ? pending() : null,
);
