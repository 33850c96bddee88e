// svc console: the dashboard. Posture, incidents, queue health, live findings over SSE,
// 24-hour timeline and 30-day trend.
import { api, h, mount, section, lazy, kv, table, time, sev, state, num, errorText } from './lib.js';
import { bars, hourLabel } from './chart.js';

const SEVS = ['critical', 'high', 'warning'];

function overview(st) {
  const sc = st.severity_counts || {};
  const inc = st.incidents_open_by_severity || {};
  const incidents = SEVS.map((k) => h('li', {}, sev(k.toUpperCase()), ' ', h('strong', {}, num(inc[k] ?? 0))));
  return h('div', { class: 'grid' },
    section('Posture',
      h('p', { class: 'big' }, state(st.security_posture || 'unknown')),
      kv([
        ['Status', state(st.status || 'unknown')],
        ['Active findings', num(st.findings_active)],
        ['By severity', SEVS.map((k) => `${k} ${sc[k] ?? 0}`).join(', ')],
        ['Blocklist', num(st.blocklist_size)],
        ['Faults', (st.faults || []).length ? (st.faults || []).map((f) => (typeof f === 'string' ? f : JSON.stringify(f))).join('; ') : 'none'],
        ['Started', time(st.started_at)],
        ['Last scan', time(st.last_scan_time)],
      ])),
    section('Open incidents by severity',
      h('ul', { class: 'feed' }, incidents),
      h('p', {}, h('a', { href: '/incidents' }, 'Incident timelines'))));
}

function queues(st) {
  const rows = Object.entries(st.queues || {}).map(([name, q]) => ({ name, ...q }));
  const order = { degraded: 0, failed: 0, warn: 1, warning: 1, ok: 2 };
  rows.sort((a, b) => (order[a.status] ?? 1) - (order[b.status] ?? 1) || a.name.localeCompare(b.name));
  const depth = (q) => (q.depth_unavailable ? 'n/a' : `${num(q.waiting)}${q.capacity_unavailable ? '' : ' / ' + num(q.capacity)} ${q.depth_unit || ''}`);
  const cond = (q) => (q.conditions || []).map((c) => (typeof c === 'string' ? c : c.name || c.condition || JSON.stringify(c))).join(', ');
  return table([
    { label: 'Queue', get: (q) => q.name },
    { label: 'State', get: (q) => state(q.status || 'unknown') },
    { label: 'Waiting', get: depth },
    { label: 'Running', get: (q) => num(q.running) },
    { label: 'Dropped (total / last min)', get: (q) => `${num(q.dropped_total)} / ${num(q.dropped_last_minute)}${q.dropped_lower_bound ? '+' : ''}` },
    { label: 'Lag', get: (q) => (q.lag_seconds === null || q.lag_seconds === undefined ? 'n/a' : `${Number(q.lag_seconds).toFixed(1)} s`) },
    { label: 'Conditions', get: cond },
  ], rows, { empty: 'No queues reported.' });
}

function findingItem(f) {
  return h('li', {}, h('div', { class: 'row' }, sev(f.severity), h('strong', {}, f.check), time(f.last_seen || f.first_seen || f.at)),
    h('div', { class: 'msg' }, f.message), f.details ? h('div', { class: 'muted' }, f.details) : null);
}

/** Live feed: the newest active findings, then every finding the event stream sends. */
function live() {
  const list = h('ul', { class: 'feed', id: 'live' });
  const indicator = h('span', { id: 'sse-state', class: 'state st-pending' }, 'connecting');
  const counts = h('span', { id: 'sse-counts', class: 'muted' }, '');
  let reconnects = 0, gaps = 0, lastId = 0, opened = false, serverLost = null;
  const show = () => {
    counts.textContent = `reconnects ${reconnects} · missed ${gaps}` + (serverLost !== null ? ` · server-counted losses ${serverLost}` : '');
  };
  const push = (f) => {
    list.prepend(findingItem(f));
    while (list.children.length > 100) list.lastChild.remove();
  };
  const first = api('findings?limit=20').then((r) => { for (const f of (r.items || []).slice().reverse()) push(f); })
    .catch((e) => list.append(h('li', {}, errorText(e))));
  const es = new EventSource('/api/v1/events');
  es.addEventListener('open', () => {
    if (opened) reconnects += 1;
    opened = true;
    indicator.textContent = 'live'; indicator.className = 'state st-live';
    show();
  });
  es.addEventListener('error', () => {
    indicator.textContent = es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting';
    indicator.className = 'state st-degraded';
  });
  es.addEventListener('finding', (ev) => {
    const id = Number(ev.lastEventId);
    // Ids number every dispatched finding of the daemon process: a gap is findings this
    // page did not receive (lost to a full buffer or while disconnected).
    if (id > lastId + 1 && lastId > 0) gaps += id - lastId - 1;
    if (id > 0) lastId = id;
    try { push(JSON.parse(ev.data)); } catch { gaps += 1; }
    show();
  });
  const setServer = (st) => { serverLost = st.queues?.['events.deliveries']?.dropped_total ?? null; show(); };
  return { node: section('Live findings', h('p', { class: 'row' }, 'Stream: ', indicator, counts), list), setServer, first };
}

const feed = live();
const statusBox = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
const queueBox = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));

const timeline = lazy('Last 24 hours', async () => {
  const r = await api('stats/timeline');
  return bars(r.items || [], SEVS, (b) => hourLabel(b.start), { name: 'findings per hour, last 24 hours' });
});
const trend = lazy('Last 30 days', async () => {
  const r = await api('stats/trend');
  return [bars(r.items || [], SEVS, (d) => String(d.date).slice(5), { name: 'findings per day, last 30 days' }),
    r.time_zone ? h('p', { class: 'muted' }, `Days in the server's zone (${r.time_zone}).`) : null];
});
mount(statusBox, h('div', { class: 'grid' }, feed.node, timeline, trend), section('Queue health', queueBox));

const status = api('status').then((st) => {
  statusBox.replaceChildren(overview(st));
  queueBox.replaceChildren(queues(st));
  feed.setServer(st);
}).catch((e) => statusBox.replaceChildren(errorText(e)));
// Milliseconds from navigation to a complete first render (read by the console test).
Promise.allSettled([status, feed.first, timeline.done, trend.done]).then(() => {
  document.body.dataset.rendered = String(Math.round(performance.now()));
});
