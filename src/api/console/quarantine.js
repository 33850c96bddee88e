// svc console: quarantined files, with a text preview.
import { api, h, mount, lazy, table, time, num, errorText } from './lib.js';

const preview = h('section', { class: 'drawer', hidden: true });
async function show(q) {
  preview.hidden = false;
  preview.replaceChildren(h('h2', {}, 'Preview'), h('p', { class: 'loading' }, 'Loading…'));
  try {
    const p = await api('quarantine-preview?id=' + encodeURIComponent(q.id));
    preview.replaceChildren(h('h2', {}, 'Preview'), h('p', {}, p.original_path, ` (${num(p.size)} bytes, sha256 ${p.sha256}${p.truncated ? ', cut' : ''})`), h('pre', {}, p.content || ''));
  } catch (e) { preview.replaceChildren(h('h2', {}, 'Preview'), errorText(e)); }
}

mount(preview, lazy('Quarantined files', async () => {
  const r = await api('quarantine');
  return table([
    { label: 'Quarantined', get: (q) => time(q.quarantined_at) },
    { label: 'Original path', wide: true, get: (q) => q.original_path },
    { label: 'Check', get: (q) => q.check },
    { label: 'Reason', wide: true, get: (q) => q.reason || '' },
    { label: 'Account', get: (q) => q.account || '' },
    { label: 'Restored', get: (q) => (q.restored_at ? time(q.restored_at) : 'no') },
    { label: '', get: (q) => { const b = h('button', { type: 'button' }, 'Preview'); b.addEventListener('click', () => show(q)); return b; } },
  ], r.items || [], { empty: 'Nothing is quarantined.' });
}));
