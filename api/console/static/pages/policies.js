// 规则 Policies (admin): the grace after start before a no-show is released, per resource
// category, with peak windows that override it; and the no-show freeze (how many no-shows within
// how many days freeze a guest's account, and for how long).

import { api, listAll } from '../api.js';
import { t } from '../i18n.js';
import {
  card,
  checkedWeekdays,
  field,
  fieldError,
  formError,
  h,
  indexRows,
  input,
  num,
  removeButton,
  submitButton,
  submitForm,
  timeBox,
  toast,
  weekdayBoxes,
} from '../ui.js';

// The API counts grace in seconds; people think of it in minutes.
const toMinutes = (seconds) => (seconds % 60 ? (seconds / 60).toFixed(2) : String(seconds / 60));
const toSeconds = (minutes) => (minutes === '' ? NaN : Math.round(Number(minutes) * 60));

function peakRow(rule, reindex) {
  const row = h(
    'div',
    { class: 'rule-row', 'data-test': 'peak-row' },
    h('div', { class: 'rule-days' }, weekdayBoxes('weekdays', rule.weekdays || []), fieldError('weekdays')),
    h('label', { class: 'rule-time' }, h('span', {}, t('grace.from')), timeBox('from', rule.from), fieldError('from')),
    h('label', { class: 'rule-time' }, h('span', {}, t('grace.to')), timeBox('to', rule.to), fieldError('to')),
    h('label', { class: 'rule-time' }, h('span', {}, t('grace.minutes')), h('input', { name: 'peak_grace', class: 'short', inputmode: 'decimal', value: rule.grace_seconds === undefined ? '' : toMinutes(rule.grace_seconds), 'data-test': 'input-peak-grace' }), fieldError('grace_seconds')),
    removeButton(() => { row.remove(); reindex(); }),
    fieldError(''),
  );
  return row;
}

function peakOf(row) {
  return {
    weekdays: checkedWeekdays(row.querySelector('.weekdays')),
    from: row.querySelector('[name=from]').value.trim(),
    to: row.querySelector('[name=to]').value.trim(),
    grace_seconds: toSeconds(row.querySelector('[name=peak_grace]').value.trim()),
  };
}

/** One category's grace policy; policy is null for a new one, whose category is typed in. */
function graceForm(policy, categories, ctx) {
  const isNew = !policy;
  const p = policy || { category: '', grace_seconds: 900, peak: [] };
  const peaks = h('div', { class: 'rules' });
  const reindex = () => indexRows(peaks, 'peak');
  for (const rule of p.peak || []) peaks.append(peakRow(rule, reindex));
  reindex();
  const category = isNew
    ? h('input', { name: 'category', list: 'grace-categories', 'data-test': 'input-category', placeholder: t('grace.categoryPlaceholder') })
    : h('input', { name: 'category', value: p.category, readonly: true, 'data-test': 'input-category' });
  const grace = input('grace', { inputmode: 'decimal', value: toMinutes(p.grace_seconds), 'data-test': 'input-grace' });
  const form = h(
    'form',
    { class: 'form grace-form', 'data-test': 'grace-form', 'data-category': p.category },
    formError(),
    isNew && h('datalist', { id: 'grace-categories' }, categories.map((c) => h('option', { value: c }))),
    h(
      'div',
      { class: 'form-grid' },
      field(t('grace.category'), category, 'category', t('grace.categoryHint')),
      field(t('grace.default'), grace, 'grace_seconds', t('grace.defaultHint')),
    ),
    h('h3', {}, t('grace.peak')),
    h('p', { class: 'hint' }, t('grace.peakHint')),
    fieldError('peak'),
    peaks,
    h('button', { type: 'button', class: 'btn btn-small', 'data-test': 'peak-add', onclick: () => { peaks.append(peakRow({}, reindex)); reindex(); } }, t('common.addRow')),
    h('div', { class: 'form-actions' }, submitButton(t('common.save'), 'grace-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = { category: category.value.trim(), grace_seconds: toSeconds(grace.value.trim()), peak: [...peaks.children].map(peakOf) };
    submitForm(form, async () => {
      await api('PUT', '/admin/policies/grace', { body });
      toast(t('grace.saved', { category: body.category || t('grace.noCategory') }));
      await ctx.reload();
    });
  });
  return form;
}

async function graceCard(ctx) {
  const categories = [...new Set((await listAll('/resources')).map((r) => r.category))].sort();
  let policies = null;
  try {
    policies = (await api('GET', '/admin/policies/grace')).items || [];
  } catch (err) {
    if (!err.routeMissing) throw err;
  }
  return card(
    t('grace.title'),
    h('p', { class: 'lead' }, t('grace.lead')),
    policies === null && h('div', { class: 'box box-warn', 'data-test': 'grace-unknown' }, t('grace.unknown')),
    policies && !policies.length && h('div', { class: 'empty' }, t('grace.none')),
    (policies || []).map((p) => h('div', { class: 'subcard' }, h('h3', {}, p.category || t('grace.noCategory')), graceForm(p, categories, ctx))),
    h('details', { class: 'disclosure', open: policies === null }, h('summary', { class: 'btn', 'data-test': 'grace-new-open' }, t('grace.new')), graceForm(null, categories, ctx)),
  );
}

function noshowCard(policy, ctx) {
  const fields = ['max_noshows', 'within_days', 'freeze_days'];
  const form = h(
    'form',
    { class: 'form', 'data-test': 'noshow-form' },
    formError(),
    h('div', { class: 'form-grid' }, fields.map((n) => field(t(`noshow.${n}`), input(n, { type: 'number', min: 0, value: policy.enabled ? policy[n] : '' }), n, t(`noshow.${n}Hint`)))),
    h('div', { class: 'form-actions' }, submitButton(t('common.save'), 'noshow-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = Object.fromEntries(fields.map((n) => [n, num(form[n].value)]));
    submitForm(form, async () => {
      await api('PUT', '/admin/policies/noshow', { body });
      toast(t('noshow.saved'));
      await ctx.reload();
    });
  });
  const state = policy.enabled
    ? t('noshow.on', { max: policy.max_noshows, days: policy.within_days, freeze: policy.freeze_days })
    : t('noshow.off');
  return card(t('noshow.title'), h('p', { class: 'lead' }, t('noshow.lead')), h('div', { class: `box ${policy.enabled ? 'box-info' : 'box-muted'}`, 'data-test': 'noshow-state' }, state), form);
}

export async function render(ctx) {
  const { root } = ctx;
  root.append(h('h1', {}, t('nav.policies')));
  const [grace, noshow] = await Promise.all([graceCard(ctx), api('GET', '/admin/policies/noshow')]);
  if (!ctx.isCurrent()) return;
  root.append(grace, noshowCard(noshow, ctx));
}
