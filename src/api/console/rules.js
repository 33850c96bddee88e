// svc console: per-rule WAF management. Enable/disable is staged here and applied with one
// reload; escalation toggles work even without the waf.* keys.
import { api, post, h, mount, section, lazy, table, num, state, toast, admin, action, muted, changeForm } from './lib.js';

const staged = new Map(); // rule id -> wanted enabled state
let applyBtn = null;

function stagedNote() {
  if (applyBtn) applyBtn.textContent = staged.size ? `Apply ${staged.size} change(s) with one reload` : 'Apply (no staged change)';
}

function rules(manage) {
  return lazy('Rules', async (reload) => {
    const [r, esc] = await Promise.all([api('waf/rules'), api('waf/rules/escalation')]);
    const items = r.items || [];
    const excluded = new Set(esc.excluded || []);
    const enable = (x) => {
      if (!admin) return x.enabled ? 'enabled' : 'disabled';
      const box = h('input', { type: 'checkbox', class: 'write', checked: staged.has(x.id) ? staged.get(x.id) : x.enabled, disabled: !manage, 'aria-label': `rule ${x.id} enabled`, 'data-rule': x.id });
      box.addEventListener('change', () => {
        if (box.checked === x.enabled) staged.delete(x.id); else staged.set(x.id, box.checked);
        stagedNote();
      });
      return h('label', { class: 'check' }, box, x.staged ? ' (reload pending)' : '');
    };
    const escalation = (x) => {
      const on = !excluded.has(x.id);
      return [state(on ? 'on' : 'off'), ' ', action(on ? 'Turn off' : 'Turn on', async () => {
        const a = await post('waf/rules/escalation', { rule_id: x.id, escalation: !on });
        toast(`Rule ${a.rule_id}: escalation ${a.escalation ? 'on' : 'off'}`);
        reload();
      }, { attrs: { 'data-escalation': x.id, 'aria-label': `Turn escalation of rule ${x.id} ${on ? 'off' : 'on'}` } })];
    };
    applyBtn = action('Apply', async () => {
      const disabled = items.filter((x) => (staged.has(x.id) ? !staged.get(x.id) : !x.enabled)).map((x) => x.id);
      const a = await post('waf/rules/apply', { disabled });
      staged.clear();
      toast(a.reloaded ? 'Applied and reloaded.' : 'Applied; the reload is still running.');
      reload();
    });
    if (applyBtn && !manage) applyBtn.disabled = true;
    stagedNote();
    return [
      manage ? null : h('p', { class: 'notice' }, 'Rule management is not configured (waf.rules_file, waf.overrides_file, waf.reload_command): enabling and disabling is off; escalation toggles work.'),
      admin ? h('div', { class: 'row' }, applyBtn) : null,
      table([
        { label: 'Rule', get: (x) => String(x.id) },
        { label: 'Description', wide: true, get: (x) => x.description || '' },
        { label: 'Action', get: (x) => x.action },
        { label: 'Hits (24 h)', get: (x) => num(x.hits_24h) },
        { label: 'Enabled', get: enable },
        { label: 'Escalation', get: escalation },
      ], items),
    ];
  });
}

function exclusions() {
  return lazy('Escalation exclusions', async (reload) => {
    const esc = await api('waf/rules/escalation');
    return [
      h('p', { class: 'muted' }, 'Excluded rules still deny; their denies no longer block the address in the firewall.'),
      (esc.excluded || []).length ? h('ul', {}, esc.excluded.map((id) => h('li', {}, String(id), ' ',
        action('Turn escalation on', async () => { await post('waf/rules/escalation', { rule_id: id, escalation: true }); reload(); })))) : muted('No rule is excluded.'),
      changeForm([{ name: 'rule_id', label: 'Rule id', type: 'number', required: true }], 'Exclude from escalation', async (v) => {
        await post('waf/rules/escalation', { rule_id: Number(v.rule_id), escalation: false });
        toast(`Rule ${v.rule_id}: escalation off`);
        reload();
      }),
    ];
  });
}

let manage = false;
try { manage = !!(await api('waf/stats')).management?.configured; } catch { manage = false; }
mount(rules(manage), exclusions());
