// svc console: quarantined files: a text preview, restore, and delete of a selection.
import { api, post, h, mount, lazy, table, time, num, errorText, action, admin, toast } from './lib.js';

const preview = h('section', { class: 'drawer', id: 'preview', hidden: true });
async function show(q) {
  preview.hidden = false;
  preview.replaceChildren(h('h2', {}, 'Preview'), h('p', { class: 'loading' }, 'Loading…'));
  try {
    const p = await api('quarantine-preview?id=' + encodeURIComponent(q.id));
    // `text`: the bytes for people, control characters and invalid UTF-8 escaped.
    preview.replaceChildren(h('h2', {}, 'Preview'), h('p', {}, q.path_shown ?? q.original_path, ` (${num(p.size)} bytes, sha256 ${p.sha256}${p.truncated ? ', cut' : ''})`), h('pre', { id: 'preview-text' }, p.text ?? p.content ?? ''));
  } catch (e) { preview.replaceChildren(h('h2', {}, 'Preview'), errorText(e)); }
}

const picked = new Set();
const pickBox = (q) => h('input', { type: 'checkbox', class: 'write', 'aria-label': 'Select ' + q.id, checked: picked.has(q.id), onchange: (ev) => { if (ev.target.checked) picked.add(q.id); else picked.delete(q.id); } });

const list = lazy('Quarantined files', async (reload) => {
  const r = await api('quarantine');
  return [admin ? h('div', { class: 'row' }, action('Delete selected', async () => {
    if (!picked.size) { toast('Select entries first', null, true); return; }
    let res;
    try { res = await post('quarantine/bulk-delete', { ids: [...picked] }); } catch (e) { res = e.body || { deleted: [], failures: [{ id: '', error: e.message }] }; }
    picked.clear();
    const fails = res.failures || [];
    toast(`${(res.deleted || []).length} deleted` + (fails.length ? `; failed: ${fails.map((x) => `${x.id} ${x.error}`).join('; ')}` : ''), null, fails.length > 0);
    reload();
  }, { danger: true, confirm: 'Press again to delete', attrs: { 'data-act': 'bulk-delete' } })) : null,
  table([
    admin ? { label: 'Select', get: (q) => (q.restored_at ? '' : pickBox(q)) } : null,
    { label: 'Quarantined', get: (q) => time(q.quarantined_at) },
    { label: 'Original path', wide: true, get: (q) => q.path_shown ?? q.original_path },
    { label: 'Check', get: (q) => q.check },
    { label: 'Reason', wide: true, get: (q) => q.reason || '' },
    { label: 'Account', get: (q) => q.account || '' },
    { label: 'Restored', get: (q) => (q.restored_at ? time(q.restored_at) : 'no') },
    { label: '', get: (q) => [
      q.restored_at ? null : h('button', { type: 'button', 'data-preview': q.id, onclick: () => show(q) }, 'Preview'),
      q.restored_at ? null : action('Restore', async () => {
        const x = await post('quarantine-restore', { id: q.id }); toast(`Restored to ${x.original_path}`); reload();
      }, { confirm: 'Press again to restore', attrs: { 'data-restore': q.id } })] },
  ].filter(Boolean), r.items || [], { empty: 'Nothing is quarantined.' })];
});
mount(preview, list);
