// One resource's settings: its details (name, kind, category, capacity, price, active or disabled),
// its opening hours (weekly rules, closures and special hours, slot length, horizon) and its
// booking rules. Each is one form and one request: it saves whole or not at all.

import { api, listAll } from '../api.js';
import { t } from '../i18n.js';
import {
  card,
  centsToYuan,
  checkedWeekdays,
  field,
  fieldError,
  formError,
  h,
  indexRows,
  input,
  num,
  removeButton,
  select,
  submitButton,
  submitForm,
  timeBox,
  toast,
  weekdayBoxes,
  yuanToCents,
} from '../ui.js';

// ---- details (PATCH /admin/resources/{id}) ----

function detailsForm(r, ctx) {
  const form = h(
    'form',
    { class: 'form form-grid', 'data-test': 'resource-edit-form' },
    formError(),
    field(t('catalog.name'), input('name', { value: r.name, required: true }), 'name'),
    field(t('resource.kind'), input('kind', { value: r.kind, required: true }), 'kind', t('resource.kindHint')),
    field(t('resource.category'), input('category', { value: r.category }), 'category', t('resource.categoryHint')),
    field(t('resource.capacity'), input('capacity', { type: 'number', min: 1, value: r.capacity }), 'capacity', t('resource.capacityHint')),
    field(t('resource.price'), input('price', { inputmode: 'decimal', value: centsToYuan(r.price_cents) }), 'price_cents', t('resource.priceHint')),
    field(t('catalog.col.status'), select('status', [['active', t('resource.status.active')], ['disabled', t('resource.status.disabled')]], r.status), 'status'),
    h(
      'div',
      { class: 'field field-wide consequences', 'data-test': 'resource-consequences' },
      h('strong', {}, t('resource.futureTitle')),
      h('ul', {}, h('li', {}, t('resource.futureCapacity')), h('li', {}, t('resource.futureDisable')), h('li', {}, t('resource.futurePrice'))),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'cancel_affected', 'data-test': 'input-cancel_affected' }), t('resource.cancelAffected')),
      fieldError('cancel_affected'),
    ),
    h('div', { class: 'form-actions' }, submitButton(t('common.save'), 'resource-edit-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = {
      name: form.name.value.trim(),
      kind: form.kind.value.trim(),
      category: form.category.value.trim(),
      capacity: num(form.capacity.value),
      price_cents: yuanToCents(form.price.value),
      status: form.status.value,
    };
    if (form.cancel_affected.checked) body.cancel_affected = true;
    submitForm(form, async () => {
      await api('PATCH', `/admin/resources/${r.resource_id}`, { body });
      toast(t('common.saved'));
      await ctx.reload();
    });
  });
  return form;
}

// ---- opening hours (GET/PUT /admin/resources/{id}/schedule) ----


function weeklyRow(rule, reindex) {
  const row = h(
    'div',
    { class: 'rule-row', 'data-test': 'weekly-row' },
    h('div', { class: 'rule-days' }, weekdayBoxes('weekdays', rule.weekdays || []), fieldError('weekdays')),
    h('label', { class: 'rule-time' }, h('span', {}, t('schedule.open')), timeBox('open', rule.open), fieldError('open')),
    h('label', { class: 'rule-time' }, h('span', {}, t('schedule.close')), timeBox('close', rule.close), fieldError('close')),
    removeButton(() => { row.remove(); reindex(); }),
    fieldError(''),
  );
  return row;
}

function exceptionRow(ex, reindex) {
  const kind = select('kind', [['closed', t('schedule.closedDay')], ['hours', t('schedule.specialHours')]], ex.closed || !ex.open ? 'closed' : 'hours');
  const hours = h(
    'span',
    { class: 'rule-hours' },
    h('label', { class: 'rule-time' }, h('span', {}, t('schedule.open')), timeBox('open', ex.open), fieldError('open')),
    h('label', { class: 'rule-time' }, h('span', {}, t('schedule.close')), timeBox('close', ex.close), fieldError('close')),
  );
  const showHours = () => (hours.hidden = kind.value === 'closed');
  kind.addEventListener('change', showHours);
  showHours();
  const row = h(
    'div',
    { class: 'rule-row', 'data-test': 'exception-row' },
    h('label', { class: 'rule-time' }, h('span', {}, t('schedule.date')), h('input', { type: 'date', name: 'date', value: ex.date || '', 'data-test': 'input-date' }), fieldError('date')),
    kind,
    hours,
    removeButton(() => { row.remove(); reindex(); }),
    fieldError(''),
  );
  return row;
}


function weeklyOf(row) {
  return { weekdays: checkedWeekdays(row.querySelector('.weekdays')), open: row.querySelector('[name=open]').value.trim(), close: row.querySelector('[name=close]').value.trim() };
}

function exceptionOf(row) {
  const date = row.querySelector('[name=date]').value;
  if (row.querySelector('[name=kind]').value === 'closed') return { date, closed: true };
  return { date, open: row.querySelector('[name=open]').value.trim(), close: row.querySelector('[name=close]').value.trim() };
}

function scheduleForm(r, schedule, ctx) {
  const weekly = h('div', { class: 'rules', 'data-test': 'weekly-rules' });
  const exceptions = h('div', { class: 'rules', 'data-test': 'exception-rules' });
  const reindex = () => { indexRows(weekly, 'weekly'); indexRows(exceptions, 'exceptions'); };
  for (const rule of schedule.weekly) weekly.append(weeklyRow(rule, reindex));
  for (const ex of schedule.exceptions) exceptions.append(exceptionRow(ex, reindex));
  reindex();
  const add = (list, row, test) => h('button', { type: 'button', class: 'btn btn-small', 'data-test': test, onclick: () => { list.append(row()); reindex(); } }, t('common.addRow'));

  const form = h(
    'form',
    { class: 'form', 'data-test': 'schedule-form' },
    formError(),
    h(
      'div',
      { class: 'form-grid' },
      field(t('schedule.slotMinutes'), input('slot_minutes', { type: 'number', min: 1, value: schedule.slot_minutes || '' }), 'slot_minutes', t('schedule.slotHint')),
      field(t('schedule.horizon'), input('horizon_days', { type: 'number', min: 1, value: schedule.horizon_days || 30 }), 'horizon_days', t('schedule.horizonHint')),
    ),
    h('h3', {}, t('schedule.weekly')),
    h('p', { class: 'hint' }, t('schedule.weeklyHint')),
    fieldError('weekly'),
    weekly,
    add(weekly, () => weeklyRow({ weekdays: [], open: '', close: '' }, reindex), 'weekly-add'),
    h('h3', {}, t('schedule.exceptions')),
    h('p', { class: 'hint' }, t('schedule.exceptionsHint')),
    fieldError('exceptions'),
    exceptions,
    add(exceptions, () => exceptionRow({ closed: true }, reindex), 'exception-add'),
    h(
      'div',
      { class: 'consequences' },
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'cancel_affected', 'data-test': 'input-schedule-cancel_affected' }), t('schedule.cancelAffected')),
      h('p', { class: 'hint' }, t('schedule.cancelAffectedHint')),
      fieldError('cancel_affected'),
    ),
    h('div', { class: 'form-actions' }, submitButton(t('schedule.save'), 'schedule-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = {
      slot_minutes: num(form.slot_minutes.value),
      horizon_days: num(form.horizon_days.value),
      weekly: [...weekly.children].map(weeklyOf),
      exceptions: [...exceptions.children].map(exceptionOf),
    };
    if (form.cancel_affected.checked) body.cancel_affected = true;
    submitForm(form, async () => {
      await api('PUT', `/admin/resources/${r.resource_id}/schedule`, { body });
      toast(t('schedule.saved'));
      await ctx.reload();
    });
  });
  return form;
}

/**
 * The stored schedule, and whether it is: a resource without one yet (slot_minutes 0, the GET
 * answering 404) starts from a blank row; so does one on a server that cannot answer it, with a
 * warning, since saving replaces what is stored.
 */
async function loadSchedule(r) {
  const blank = { slot_minutes: r.slot_minutes || '', horizon_days: 30, weekly: [{ weekdays: [], open: '', close: '' }], exceptions: [] };
  try {
    return { schedule: await api('GET', `/admin/resources/${r.resource_id}/schedule`), state: 'stored' };
  } catch (err) {
    if (!err.routeMissing) throw err;
    return { schedule: blank, state: r.slot_minutes ? 'unknown' : 'unset' };
  }
}

// ---- booking rules (GET /resources/{id}/policy, PUT /admin/resources/{id}/policy) ----

const POLICY_NUMBERS = [
  'min_notice_minutes',
  'max_days_ahead',
  'cancel_cutoff_minutes',
  'cancel_refund_percent',
  'late_cancel_refund_percent',
  'noshow_refund_percent',
  'reschedule_cutoff_minutes',
  'max_reschedules',
  'approval_window_minutes',
];

function policyForm(r, policy, ctx) {
  const approval = h('input', { type: 'checkbox', name: 'requires_approval', checked: policy.requires_approval, 'data-test': 'input-requires_approval' });
  const form = h(
    'form',
    { class: 'form', 'data-test': 'policy-form' },
    formError(),
    h(
      'div',
      { class: 'field field-wide approval-toggle' },
      h('label', { class: 'check' }, approval, h('strong', {}, t('policy.requires_approval'))),
      h('span', { class: 'field-hint' }, t('policy.requires_approvalHint')),
      fieldError('requires_approval'),
    ),
    h(
      'div',
      { class: 'form-grid' },
      POLICY_NUMBERS.map((name) => field(t(`policy.${name}`), input(name, { type: 'number', min: 0, value: policy[name] }), name, t(`policy.${name}Hint`))),
    ),
    h('div', { class: 'form-actions' }, submitButton(t('policy.save'), 'policy-submit')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = Object.fromEntries(POLICY_NUMBERS.map((n) => [n, num(form[n].value)]));
    body.requires_approval = approval.checked;
    submitForm(form, async () => {
      await api('PUT', `/admin/resources/${r.resource_id}/policy`, { body });
      toast(t('policy.saved'));
      await ctx.reload();
    });
  });
  return form;
}

export async function render(ctx) {
  const { root, params } = ctx;
  const all = await listAll('/resources');
  const r = all.find((x) => x.resource_id === params.id);
  root.append(h('div', { class: 'crumbs' }, h('a', { href: '#/catalog' }, t('nav.catalog')), ' / ', r ? r.name : `#${params.id}`));
  if (!r) return root.append(h('div', { class: 'box box-error' }, t('resource.notFound')));
  const [{ schedule, state }, policy] = await Promise.all([loadSchedule(r), api('GET', `/resources/${r.resource_id}/policy`)]);
  if (!ctx.isCurrent()) return;
  root.append(
    h('h1', {}, r.name, ' ', r.status !== 'active' && h('span', { class: 'badge badge-muted' }, t('resource.status.disabled'))),
    h(
      'nav',
      { class: 'tabs' },
      [['sec-details', 'resource.details'], ['sec-hours', 'schedule.title'], ['sec-rules', 'policy.title']].map(([id, label]) => h('button', { type: 'button', class: 'tab', onclick: () => jump(id) }, t(label))),
    ),
    h('div', { id: 'sec-details' }, card(t('resource.details'), detailsForm(r, ctx))),
    h(
      'div',
      { id: 'sec-hours' },
      card(
        t('schedule.title'),
        state === 'unknown' && h('div', { class: 'box box-warn', 'data-test': 'schedule-unknown' }, t('schedule.unknown')),
        state === 'unset' && h('div', { class: 'box box-info', 'data-test': 'schedule-unset' }, t('schedule.unset')),
        schedule.generated_until && h('p', { class: 'hint' }, t('schedule.generatedUntil', { date: schedule.generated_until })),
        scheduleForm(r, schedule, ctx),
      ),
    ),
    h('div', { id: 'sec-rules' }, card(t('policy.title'), policyForm(r, policy, ctx))),
  );
}

/** Scrolls to a section: buttons rather than #links, since the hash is the router's. */
function jump(id) {
  document.getElementById(id)?.scrollIntoView({ behavior: 'smooth', block: 'start' });
}
