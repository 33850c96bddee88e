// svc console: the audit history.
import { api, h, mount, lazy, table, time, state, query, qs, pager } from './lib.js';

mount(lazy('Audit entries', async () => {
  const r = await api('audit' + qs({ limit: 100, offset: query.get('offset') || '' }));
  return [table([
    { label: 'Time', get: (e) => time(e.at) }, { label: 'Actor', get: (e) => e.actor },
    { label: 'Via', get: (e) => e.via }, { label: 'Action', get: (e) => e.action },
    { label: 'Target', wide: true, get: (e) => e.target || '' }, { label: 'Outcome', get: (e) => state(e.outcome) },
    { label: 'From', wide: true, get: (e) => e.remote_ip || '' },
  ], r.items || [], { empty: 'No audit entries.' }), pager(r)];
}));
