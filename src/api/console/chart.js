// svc console: bar charts drawn as SVG in the browser (DOM nodes, no markup strings).
import { h } from './lib.js';

const NS = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...kids) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  for (const k of kids) e.append(k instanceof Node ? k : String(k));
  return e;
}

/**
 * Stacked bars: one per item, `keys` stacked bottom up (CSS class `c-<key>`).
 * `label(item)` names a bar (axis and tooltip); every third label or so is drawn.
 */
export function bars(items, keys, label, { height = 180, name = 'chart' } = {}) {
  const W = 400, H = height, left = 30, bottom = 22, top = 8;
  const total = (it) => keys.reduce((a, k) => a + (Number(it[k]) || 0), 0);
  const max = Math.max(1, ...items.map(total));
  const bw = (W - left) / Math.max(1, items.length);
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': name });
  svg.append(s('line', { class: 'axis', x1: left, y1: y(0), x2: W, y2: y(0) }));
  svg.append(s('text', { x: 0, y: y(max) + 12 }, String(max)));
  svg.append(s('text', { x: 0, y: y(0) }, '0'));
  const every = Math.max(1, Math.ceil(items.length / 5));
  items.forEach((it, i) => {
    const x = left + i * bw;
    let acc = 0;
    const g = s('g', {});
    g.append(s('title', {}, `${label(it)}: ` + keys.map((k) => `${k} ${Number(it[k]) || 0}`).join(', ')));
    for (const k of keys) {
      const v = Number(it[k]) || 0;
      if (v > 0) g.append(s('rect', { class: `c-${k}`, x: x + 1, width: Math.max(1, bw - 2), y: y(acc + v), height: y(acc) - y(acc + v) }));
      acc += v;
    }
    // A transparent full-height target so the tooltip shows on empty bars too.
    g.append(s('rect', { x, width: bw, y: top, height: H - top - bottom, 'fill-opacity': 0 }));
    svg.append(g);
    if (i % every === 0) svg.append(s('text', { x: x + 1, y: H - 4 }, label(it)));
  });
  return h('figure', { class: 'fig' }, svg,
    h('figcaption', { class: 'legend' }, keys.map((k) => h('span', { class: `l-${k}` }, k))));
}

/** Hour label in the browser's zone of an instant. */
export function hourLabel(iso) {
  const d = new Date(String(iso).replace(/(\.\d{3})\d+/, '$1'));
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
}

/** Horizontal bars, one row per item: `[label, value]` pairs, the label beside its bar. */
export function hbars(rows, { name = 'chart' } = {}) {
  const W = 400, row = 22, labelW = 170;
  const max = Math.max(1, ...rows.map(([, v]) => Number(v) || 0));
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${row * rows.length + 4}`, role: 'img', 'aria-label': name });
  rows.forEach(([label, v], i) => {
    const y = i * row + 2;
    const w = ((W - labelW - 40) * (Number(v) || 0)) / max;
    const g = s('g', {}, s('title', {}, `${label}: ${v}`));
    g.append(s('text', { x: 0, y: y + 15 }, label));
    g.append(s('rect', { class: 'c-count', x: labelW, y: y + 3, width: Math.max(w, 1), height: row - 8 }));
    g.append(s('text', { x: labelW + w + 4, y: y + 15 }, String(v)));
    svg.append(g);
  });
  return svg;
}
