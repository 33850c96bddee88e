// svc console: firewall blocks, allows and subnets, an address check, and the rollback
// timer (tentative apply, confirm, revert, with a countdown).
import { api, post, h, mount, section, lazy, kv, table, time, state, num, yes, toast, action, changeForm, errorText } from './lib.js';

function overview() {
  return lazy('Engine', async () => {
    const s = await api('firewall/status');
    const b = s.blocks || {};
    return [
      kv([
        ['Active', state(s.active ? 'active' : 'inactive')], ['Mode', s.mode], ['Table', `${s.table} (${s.table_present ? 'present' : 'absent'})`],
        ['Blocks', `${num(b.addresses)} addresses, ${num(b.subnets)} subnets (${num(b.temporary)} temporary, ${num(b.permanent)} permanent)`],
        ['Allows', typeof s.allows === 'number' ? num(s.allows) : num((s.allows || []).length)],
        ['Dry run', yes(s.dry_run)], ['Last re-assert', time(s.last_reassert_at)],
        ['Kernel failures', num(s.kernel_failures_total)], s.last_error ? ['Last error', s.last_error] : null,
        ['Sets', Object.entries(s.sets || {}).map(([k, v]) => `${k} ${v}`).join(', ')],
      ]),
      Array.isArray(s.allows) && s.allows.length ? [h('h3', {}, 'Allowed'), table([
        { label: 'Address or range', get: (a) => a.ip || a.range || String(a) }, { label: 'Reason', wide: true, get: (a) => a.reason || '' },
        { label: 'Expires', get: (a) => (a.expires_at ? time(a.expires_at) : 'never') },
        { label: '', get: (a) => action('Remove', async () => { await post('firewall/remove-allow', { ip: a.ip }); toast(`Removed allow ${a.ip}`); }) },
      ], s.allows)] : null,
    ];
  });
}

function blocks() {
  return lazy('Blocked addresses and subnets', async (reload) => {
    const r = await api('blocked-ips?limit=1000');
    const isNet = (b) => String(b.ip).includes('/');
    return [
      h('div', { class: 'row' }, action('Remove all temporary blocks', async () => { const x = await post('firewall/flush'); toast(`${x.removed} removed`); reload(); }, { confirm: 'Confirm flush', danger: true })),
      table([
        { label: 'Address', get: (b) => b.ip }, { label: 'Reason', wide: true, get: (b) => b.reason || '' }, { label: 'Source', get: (b) => b.source || '' },
        { label: 'Since', get: (b) => time(b.created_at) }, { label: 'Expires', get: (b) => (b.permanent ? 'never' : time(b.expires_at)) },
        { label: 'Dry run', get: (b) => yes(!!b.dry_run) },
        { label: '', get: (b) => action(isNet(b) ? 'Remove subnet' : 'Unblock', async () => {
          if (isNet(b)) await post('firewall/remove-subnet', { subnet: b.ip }); else await post('firewall/unban', { ip: b.ip });
          toast(`Removed ${b.ip}`); reload();
        }, { attrs: { 'data-unblock': b.ip } }) },
      ], r.items || [], { empty: 'Nothing is blocked.' }),
      h('h3', {}, 'Add'),
      changeForm([{ name: 'subnet', label: 'Deny subnet (CIDR)', required: true }, { name: 'reason', label: 'Reason' }], 'Deny subnet', async (v) => {
        await post('firewall/deny-subnet', { subnet: v.subnet.trim(), reason: v.reason || undefined }); toast(`Denied ${v.subnet}`); reload();
      }),
      changeForm([{ name: 'ip', label: 'Allow address or range', required: true }, { name: 'for', label: 'For (e.g. 24h; empty: permanent)', size: 8 }, { name: 'reason', label: 'Reason' }], 'Allow', async (v) => {
        const r2 = await post('firewall/allow-ip', { ip: v.ip.trim(), for: v.for || undefined, reason: v.reason || undefined });
        toast(`Allowed ${r2.ip}${r2.warning ? ': ' + r2.warning : ''}`); reload();
      }),
    ];
  });
}

function check() {
  const out = h('div', {});
  const f = h('form', { class: 'inline' }, h('label', {}, 'Address', h('input', { name: 'ip', required: true })), h('button', { type: 'submit' }, 'Check'));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const r = await api('firewall/check?ip=' + encodeURIComponent(new FormData(f).get('ip').trim()));
      out.replaceChildren(kv([['Address', r.ip], ['Blocked', yes(r.blocked)], ['Permanent', r.permanent ?? '—'], ['Temporary', r.temporary ?? '—'],
        ['Expires', time(r.expires_at)], ['Allowed', r.allowed ? `yes (${r.allowed_by || ''})` : 'no'], ['Infrastructure', yes(r.infra)]]));
    } catch (e) { out.replaceChildren(errorText(e)); }
  });
  return section('Check an address', f, out);
}

let tick = null;
function rollback() {
  return lazy('Rollback timer', async (reload) => {
    const r = await api('settings/firewall/rollback');
    if (tick) { clearInterval(tick); tick = null; }
    const parts = [kv([['State', state(r.state)], ['By', r.by], ['Changes', r.changes ? JSON.stringify(r.changes) : null],
      ['Finished', r.finished_at ? [time(r.finished_at), ` (${r.reason})`] : null]])];
    if (r.state === 'pending') {
      let left = Math.max(0, Math.round(r.remaining_seconds || 0));
      const clock = h('strong', { id: 'countdown' }, '');
      const draw = () => { clock.textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')}`; };
      draw();
      tick = setInterval(() => { left -= 1; draw(); if (left <= 0) { clearInterval(tick); tick = null; setTimeout(reload, 1500); } }, 1000);
      parts.push(h('p', {}, 'Reverts in ', clock, ' unless confirmed (deadline ', time(r.deadline), ').'),
        h('div', { class: 'row' },
          action('Keep (confirm)', async () => { await post('settings/firewall/confirm'); toast('Change kept'); reload(); }, { attrs: { 'data-rollback': 'confirm' } }),
          action('Revert now', async () => { await post('settings/firewall/revert'); toast('Change reverted'); reload(); }, { danger: true, attrs: { 'data-rollback': 'revert' } })));
    } else {
      parts.push(h('h3', {}, 'Tentative change'), changeForm([
        { name: 'changes', label: 'Run-time [firewall] keys as JSON, e.g. {"tcp_in": [22, 443]}', required: true, size: 40 },
        { name: 'timeout_min', label: 'Revert after (minutes, 1-30)', type: 'number', size: 4 },
      ], 'Apply tentatively', async (v) => {
        let changes;
        try { changes = JSON.parse(v.changes); } catch { throw new Error('changes: not valid JSON'); }
        await post('settings/firewall/tentative-apply', { changes, timeout_min: v.timeout_min ? Number(v.timeout_min) : undefined });
        reload();
      }));
    }
    return parts;
  });
}

// The engine's routes answer 503 while the firewall is off: the status says so first
// (`rollback.state` is `unavailable` with the reason), and then the page shows that state
// and the stored blocks (read only) instead of asking them.
function off(reason) {
  return [
    section('Engine', kv([['State', state('unavailable')], ['Reason', reason || 'the firewall engine is not running']])),
    lazy('Blocked addresses and subnets (stored)', async () => {
      const r = await api('blocked-ips?limit=1000');
      return table([
        { label: 'Address', get: (b) => b.ip }, { label: 'Reason', wide: true, get: (b) => b.reason || '' }, { label: 'Source', get: (b) => b.source || '' },
        { label: 'Since', get: (b) => time(b.created_at) }, { label: 'Expires', get: (b) => (b.permanent ? 'never' : time(b.expires_at)) },
      ], r.items || [], { empty: 'Nothing is blocked.' });
    }),
  ];
}

(async () => {
  let rb = null;
  try { rb = (await api('status')).rollback; } catch { rb = null; }
  if (rb && rb.state === 'unavailable') mount(off(rb.reason));
  else mount(h('div', { class: 'grid' }, overview(), check()), rollback(), blocks());
})();
