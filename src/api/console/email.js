// svc console: mail antivirus. Watcher status, engine health, scan statistics, and the
// quarantined messages with release and delete.
import { api, post, h, mount, lazy, kv, table, time, state, num, yes, admin, action, toast, query, pager, qs } from './lib.js';

function status() {
  return lazy('AV watcher', async () => {
    const s = await api('email/av/status');
    const cl = s.engines?.clamd || {};
    const sig = s.engines?.signatures || {};
    return kv([
      ['Enabled', yes(s.enabled)],
      ['Watcher', state(s.active ? 'active' : 'inactive')],
      ['Spool', s.spool_path || '—'],
      ['Watched directories', num(s.watcher?.watched_directories)],
      ['Last sweep', time(s.watcher?.last_sweep)],
      s.watcher?.error ? ['Watcher error', s.watcher.error] : null,
      ['clamd', [state(cl.status || 'unknown'), ' ', cl.health?.endpoint || '', cl.health?.version ? ` ${cl.health.version.engine || ''} sigs ${cl.health.version.signatures ?? ''}` : '']],
      ['clamd scans / found / errors', `${num(cl.health?.scans)} / ${num(cl.health?.found)} / ${num(cl.health?.errors)}`],
      cl.health?.last_error ? ['clamd last error', cl.health.last_error] : null,
      ['Signatures', [state(sig.status || 'unknown'), ` ${num(sig.rules)} rules, version ${sig.version || '—'}`]],
      ['Quarantine', s.quarantine?.enabled ? s.quarantine.path : 'off'],
      ['Staging', s.staging ? `${s.staging.path} (${s.staging.ok ? 'ok' : 'not ok'})` : '—'],
    ]);
  });
}

function stats() {
  return lazy('Scan statistics', async () => {
    const s = await api('email/stats');
    const row = (name, x) => (x ? { name, ...x } : { name, scanned: null });
    return [
      table([
        { label: 'Period', get: (x) => x.name },
        { label: 'Scanned', get: (x) => num(x.scanned) },
        { label: 'Infected', get: (x) => num(x.infected) },
        { label: 'Quarantined', get: (x) => num(x.quarantined) },
        { label: 'Incomplete', get: (x) => num(x.incomplete) },
        { label: 'Errors', get: (x) => num(x.errors) },
      ], [row('Since start', s.since_start), row('Last 24 hours', s.last_24h)]),
      h('p', { class: 'muted' }, 'Daemon started ', time(s.started_at)),
    ];
  });
}

function quarantine() {
  return lazy('Quarantined messages', async (reload) => {
    const r = await api('email/quarantine' + qs({ limit: 50, offset: query.get('offset') || '' }));
    const act = (m, verb) => action(verb === 'release' ? 'Release' : 'Delete', async () => {
      const a = await post(`email/quarantine/${encodeURIComponent(m.id)}/${verb}`);
      toast(`Message ${a.queue_id || m.id}: ${a.state}`);
      reload();
    }, verb === 'delete' ? { confirm: 'Confirm delete', danger: true } : {});
    return [table([
      { label: 'Quarantined', get: (m) => time(m.quarantined_at) },
      { label: 'State', get: (m) => state(m.state) },
      { label: 'From', wide: true, get: (m) => m.sender || '' },
      { label: 'To', wide: true, get: (m) => (m.recipients || []).join(', ') },
      { label: 'Subject', wide: true, get: (m) => m.subject || '' },
      { label: 'Verdicts', get: (m) => (m.verdicts || []).map((v) => `${v.engine}: ${v.signature}${v.name ? ' in ' + v.name : ''}`).join('; ') },
      { label: 'Size', get: (m) => num(m.size) },
      { label: 'Actions', get: (m) => (m.error ? [h('div', { class: 'error' }, m.error), act(m, 'release'), ' ', act(m, 'delete')] : [act(m, 'release'), ' ', act(m, 'delete')]) },
    ], r.items || [], { empty: 'No quarantined messages.' }), pager(r)];
  });
}

mount(h('div', { class: 'grid' }, status(), stats()), admin ? quarantine() : null);
