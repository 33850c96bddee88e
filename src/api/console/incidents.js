// svc console: incident timelines of an address or an account.
import { api, h, mount, section, lazy, table, time, sev, state, num, query, qs, filters, muted } from './lib.js';

const ip = query.get('ip') || '', account = query.get('account') || '', hours = query.get('hours') || '';
const form = filters([{ name: 'ip', label: 'Address', size: 18 }, { name: 'account', label: 'Account', size: 14 }, { name: 'hours', label: 'Hours (1-720)', type: 'number', size: 5 }]);

async function timeline() {
  const r = await api('incident' + qs({ ip, account: ip ? '' : account, hours }));
  return [
    h('h3', {}, 'Incidents'),
    table([
      { label: 'Id', get: (i) => String(i.id) }, { label: 'State', get: (i) => state(i.state) },
      { label: 'Severity', get: (i) => sev(i.severity) }, { label: 'Key', get: (i) => `${i.kind} ${i.key}` },
      { label: 'Checks', wide: true, get: (i) => (i.checks || []).join(', ') }, { label: 'Findings', get: (i) => num(i.count) },
      { label: 'First', get: (i) => time(i.first_seen) }, { label: 'Last', get: (i) => time(i.last_seen) },
    ], r.incidents || [], { empty: 'No incident in the window.' }),
    h('h3', {}, `Timeline (${num(r.total)} event(s) in ${r.hours} h${r.truncated ? ', cut' : ''})`),
    table([
      { label: 'Time', get: (x) => time(x.at) }, { label: 'Severity', get: (x) => sev(x.severity) },
      { label: 'Check', get: (x) => x.check }, { label: 'Message', wide: true, get: (x) => x.message },
    ], r.items || [], { empty: 'No events.' }),
  ];
}

mount(form, ip || account ? lazy(ip ? `Address ${ip}` : `Account ${account}`, timeline)
  : section('Timeline', muted('Name an address or an account. Open incidents are counted on the dashboard.')));
