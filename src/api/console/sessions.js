// svc console: browser sessions; revoke one or all.
import { api, h, mount, lazy, table, time, toast, action } from './lib.js';

mount(lazy('Browser sessions', async (reload) => {
  const r = await api('sessions');
  return [
    h('div', { class: 'row' }, action('Revoke all sessions (yours too)', async () => {
      await api('sessions', { method: 'DELETE' });
      location.assign('/login');
    }, { confirm: 'Confirm: revoke all', danger: true })),
    table([
      { label: 'Name', get: (s) => [s.name, s.current ? ' (this session)' : ''] },
      { label: 'Created', get: (s) => time(s.created) }, { label: 'Last seen', get: (s) => time(s.last_seen) },
      { label: 'Expires', get: (s) => time(s.expires) }, { label: 'Address', get: (s) => s.remote_ip },
      { label: 'Browser', wide: true, get: (s) => s.user_agent },
      { label: '', get: (s) => action('Revoke', async () => {
        await api('sessions/' + encodeURIComponent(s.id), { method: 'DELETE' });
        if (s.current) { location.assign('/login'); return; }
        toast('Session revoked'); reload();
      }, { danger: true, attrs: { 'data-session': s.id } }) },
    ], r.items || [], { empty: 'No sessions.' }),
  ];
}));
