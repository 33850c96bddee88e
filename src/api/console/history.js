// svc console: finding history with filters, a date range in the server's zone, paging and
// a CSV download of the same filters.
import { api, h, mount, section, table, time, sev, num, query, qs, filters, pager, errorText } from './lib.js';

const f = {};
for (const k of ['from', 'to', 'severity', 'checks', 'search']) f[k] = query.get(k) || '';
const list = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
mount(
  filters([
    { name: 'from', label: 'From (server day)', type: 'date' }, { name: 'to', label: 'To (server day)', type: 'date' },
    { name: 'severity', label: 'Severity', options: [['', 'any'], ['CRITICAL', 'critical'], ['CRITICAL,HIGH', 'high or worse'], ['HIGH', 'high'], ['WARNING', 'warning']] },
    { name: 'checks', label: 'Checks (comma-separated)', size: 18 }, { name: 'search', label: 'Search', size: 18 },
  ]),
  h('p', {}, h('a', { href: '/api/v1/history/csv' + qs(f), download: 'svc-history.csv', id: 'csv' }, 'Download CSV (newest 5,000 matches)')),
  section('History', list),
);
try {
  const r = await api('history' + qs({ ...f, limit: 50, offset: query.get('offset') || '' }));
  list.replaceChildren(
    h('p', { class: 'muted' }, `${num(r.total)} match(es)${r.search_capped ? ' (search stopped at its scan cap: narrow the dates)' : ''}.`),
    table([
      { label: 'Time', get: (x) => time(x.at) }, { label: 'Severity', get: (x) => sev(x.severity) },
      { label: 'Check', get: (x) => x.check }, { label: 'Message', wide: true, get: (x) => x.message },
      { label: 'Account', get: (x) => x.account || '' }, { label: 'Address', get: (x) => x.ip || '' },
    ], r.items || [], { empty: 'No history matches.' }),
    pager(r));
} catch (e) { list.replaceChildren(errorText(e)); }
