// 用户 Users (admin): look a guest up by user id — their no-shows and any freeze — and lift a
// freeze with a reason.

import { api, newAction } from '../api.js';
import { t } from '../i18n.js';
import { card, errorBox, field, formError, h, submitButton, submitForm, toast, zonedDateTime } from '../ui.js';

function lookupForm(ctx) {
  const box = h('input', { name: 'user_id', value: ctx.params.id || '', 'data-test': 'user-search', placeholder: t('users.placeholder'), required: true, autocomplete: 'off' });
  const form = h('form', { class: 'filters', 'data-test': 'user-lookup-form' }, box, submitButton(t('users.lookup'), 'user-lookup-submit'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const id = box.value.trim();
    if (id) ctx.go(`users/${encodeURIComponent(id)}`);
  });
  return form;
}

function unfreezeForm(u, ctx) {
  const action = newAction();
  const reason = h('textarea', { name: 'reason', rows: 2, maxlength: 160, 'data-test': 'reason', placeholder: t('users.reasonPlaceholder') });
  const form = h(
    'form',
    { class: 'form', 'data-test': 'unfreeze-form' },
    formError(),
    field(t('booking.reason'), reason, 'reason'),
    h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'btn btn-big btn-primary', 'data-test': 'action-unfreeze' }, t('users.unfreeze'))),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitForm(form, async () => {
      await api('POST', `/admin/users/${encodeURIComponent(u.user_id)}/unfreeze`, { body: { reason: reason.value.trim() }, action });
      toast(t('users.unfrozen', { id: u.user_id }));
      await ctx.reload();
    });
  });
  return form;
}

function userCard(u, ctx) {
  // A freeze spans venues, so the API answers it in UTC; it is shown in the current venue's zone.
  const localTime = (iso) => zonedDateTime(iso, ctx.venue?.timezone);
  const rows = [
    [t('users.noshows'), String(u.noshows), 'user-noshows'],
    [t('users.counted'), String(u.counted_noshows), 'user-counted'],
    [
      t('users.frozen'),
      u.frozen
        ? h('span', { class: 'badge st-CANCELLED_BY_ADMIN' }, u.frozen_until ? t('users.frozenUntil', { until: localTime(u.frozen_until) }) : t('users.frozenNow'))
        : h('span', { class: 'badge badge-ok' }, t('users.notFrozen')),
      'user-frozen',
    ],
    u.pardoned_at && [t('users.pardoned'), t('users.pardonLine', { at: localTime(u.pardoned_at), by: u.pardoned_by || '—', reason: u.pardon_reason || '—' }), 'user-pardon'],
    [t('nav.bookings'), h('a', { href: ctx.link('bookings', { q: u.user_id }), 'data-test': 'user-bookings' }, t('users.bookingsLink'))],
  ].filter(Boolean);
  return card(
    t('users.user', { id: u.user_id }),
    h('dl', { class: 'details' }, rows.map(([label, value, test]) => [h('dt', {}, label), h('dd', { 'data-test': test }, value)])),
    u.frozen && h('h3', {}, t('users.unfreezeTitle')),
    u.frozen && unfreezeForm(u, ctx),
  );
}

export async function render(ctx) {
  const { root, params } = ctx;
  root.append(h('h1', {}, t('nav.users')), card(t('users.lookupTitle'), h('p', { class: 'hint' }, t('users.hint')), lookupForm(ctx)));
  if (!params.id) return;
  try {
    const u = await api('GET', `/admin/users/${encodeURIComponent(params.id)}`);
    if (ctx.isCurrent()) root.append(userCard(u, ctx));
  } catch (err) {
    if (!('status' in err)) throw err;
    root.append(errorBox(err));
  }
}
