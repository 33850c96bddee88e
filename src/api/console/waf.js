// svc console: WAF overview, event log and active blocks, filtered by time range, minimum
// severity and source country (the filters live in the URL).
import { api, h, mount, section, lazy, kv, table, time, sev, state, num, yes, query, qs, filters, pager } from './lib.js';

const MIN = { '': '', WARNING: 'CRITICAL,HIGH,WARNING', HIGH: 'CRITICAL,HIGH', CRITICAL: 'CRITICAL' };
const f = {
  from: query.get('from') || '', to: query.get('to') || '',
  severity: MIN[(query.get('min_severity') || '').toUpperCase()] || '',
  country: query.get('country') || '', ip: query.get('ip') || '', rule: query.get('rule') || '',
};

function overview() {
  return lazy('Status', async () => {
    const s = await api('waf/stats');
    const c = s.collector || {};
    return [
      kv([
        ['Enabled', yes(s.enabled)],
        ['Collector', c.running ? state('running') : state('stopped')],
        ['Log files', (c.files || []).join(', ') || '—'],
        ['Engines', (s.engines || []).map((e) => `${e.server}: ${e.active ? 'ModSecurity loaded' : 'not loaded'}`).join('; ') || 'none found'],
        ['Rules loaded', `${num(s.rules_loaded)} (svc ${num(s.svc_rules)})`],
        ['Events / denies (24 h)', `${num(s.events_24h)} / ${num(s.denies_24h)}`],
        ['Escalation', s.escalation ? `${s.escalation.denies} denies in ${s.escalation.window_minutes} min; excluded: ${(s.escalation.excluded_rules || []).join(', ') || 'none'}` : '—'],
        ['Stale rules', (s.stale_rules || []).map((r) => `${r.tree} (${r.age_days} d)`).join(', ') || 'none'],
        ['Rule management', s.management?.configured ? 'configured' : `not configured (missing ${(s.management?.missing || []).join(', ')})`],
      ]),
      h('div', { class: 'grid' },
        h('div', {}, h('h3', {}, 'Top rules (24 h)'), table([{ label: 'Rule', get: (r) => String(r.rule_id) }, { label: 'Denies', get: (r) => num(r.count) }], s.top_rules || [])),
        h('div', {}, h('h3', {}, 'Top addresses (24 h)'), table([{ label: 'Address', get: (r) => h('a', { href: '/threat?ip=' + encodeURIComponent(r.ip) }, r.ip) }, { label: 'Denies', get: (r) => num(r.count) }], s.top_ips || []))),
    ];
  });
}

const eventCols = [
  { label: 'Time', get: (e) => time(e.at) },
  { label: 'Severity', get: (e) => sev(e.severity) },
  { label: 'Action', get: (e) => e.action },
  { label: 'Address', get: (e) => [e.ip || '', e.country ? ` (${e.country})` : ''] },
  { label: 'Rule', get: (e) => String(e.rule_id ?? '') },
  { label: 'Request', get: (e) => `${e.method || ''} ${e.host || ''}${e.uri || ''}` },
  { label: 'Message', wide: true, get: (e) => e.message || '' },
];

function events() {
  return lazy('Event log', async () => {
    const r = await api('waf/events' + qs({ ...f, limit: 50, offset: query.get('offset') || '' }));
    return [table(eventCols, r.items || [], { empty: 'No WAF events match.' }), pager(r)];
  });
}

function blocks() {
  return lazy('Active blocks', async () => {
    const r = await api('blocked-ips?limit=1000');
    const waf = (r.items || []).filter((b) => b.source === 'waf' && (!f.ip || b.ip === f.ip));
    const denies = await api('waf/blocks' + qs({ ...f, limit: 20 }));
    return [
      table([
        { label: 'Address', get: (b) => h('a', { href: '/threat?ip=' + encodeURIComponent(b.ip) }, b.ip) },
        { label: 'Reason', wide: true, get: (b) => b.reason || '' },
        { label: 'Since', get: (b) => time(b.created_at) },
        { label: 'Expires', get: (b) => (b.permanent ? 'never' : time(b.expires_at)) },
        { label: 'Dry run', get: (b) => yes(!!b.dry_run) },
      ], waf, { empty: 'No address is blocked by WAF escalation.' }),
      h('h3', {}, `Recent denies (${num(denies.total)})`),
      table(eventCols, denies.items || [], { empty: 'No denies match.' }),
    ];
  });
}

mount(
  filters([
    { name: 'from', label: 'From', type: 'date' }, { name: 'to', label: 'To', type: 'date' },
    { name: 'min_severity', label: 'Minimum severity', options: [['', 'any'], ['WARNING', 'warning'], ['HIGH', 'high'], ['CRITICAL', 'critical']] },
    { name: 'country', label: 'Country', placeholder: 'NL', size: 3 }, { name: 'ip', label: 'Address', size: 16 }, { name: 'rule', label: 'Rule', size: 8 },
  ]),
  h('p', { class: 'muted' }, 'Dates are days in the server\u2019s time zone.'),
  overview(), events(), blocks(),
);
