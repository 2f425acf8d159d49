// 待审核 Approvals: the venue's bookings waiting for the desk (PENDING_APPROVAL), the most urgent
// first, each with the time left before it is declined on its own, and approve/decline inline.

import { api, listAll, newAction } from '../api.js';
import { t } from '../i18n.js';
import { dateTime, field, formError, h, hm, money, submitForm, timeLeft, toast } from '../ui.js';
import { namesById, noVenue, venueResources } from '../venue.js';

const URGENT_MS = 60 * 60 * 1000; // under an hour left: shown in red

function deadline(b) {
  if (!b.approval_deadline) return h('span', { class: 'muted' }, '—');
  const left = timeLeft(b.approval_deadline);
  const urgent = Date.parse(b.approval_deadline) - Date.now() < URGENT_MS;
  return h(
    'span',
    { class: `deadline${urgent ? ' urgent' : ''}`, 'data-test': 'approval-deadline' },
    dateTime(b.approval_deadline),
    h('strong', {}, left ? t('time.left', { left }) : t('time.passed')),
  );
}

function approvalRow(b, names, ctx) {
  const actions = { approve: newAction(), decline: newAction() };
  const reason = h('input', { name: 'reason', maxlength: 160, 'data-test': 'reason', placeholder: t('approvals.reasonPlaceholder') });
  const form = h(
    'form',
    { class: 'approval', 'data-test': 'booking-row', 'data-id': b.booking_id },
    h(
      'div',
      { class: 'approval-info' },
      h('a', { href: `#/booking/${b.booking_id}`, class: 'approval-title' }, `#${b.booking_id} · ${names.get(b.resource_id) || `#${b.resource_id}`}`),
      h('div', {}, `${dateTime(b.start)}–${hm(b.end)}`, b.quantity > 1 && ` ×${b.quantity}`),
      h('div', { class: 'muted' }, `${b.user_id || '—'} · ${money(b.amount_cents)}`),
      h('div', {}, h('span', { class: 'muted' }, t('approvals.deadline')), ' ', deadline(b)),
    ),
    h(
      'div',
      { class: 'approval-decide' },
      formError(),
      field(t('booking.reason'), reason, 'reason', t('approvals.reasonHint')),
      h(
        'div',
        { class: 'action-buttons' },
        h('button', { type: 'submit', class: 'btn btn-big btn-approve', 'data-action': 'approve', 'data-test': 'action-approve' }, t('action.approve')),
        h('button', { type: 'submit', class: 'btn btn-big btn-decline', 'data-action': 'decline', 'data-test': 'action-decline' }, t('action.decline')),
      ),
    ),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const verb = e.submitter?.dataset.action;
    if (!verb) return;
    const text = reason.value.trim();
    submitForm(form, async () => {
      const after = await api('POST', `/admin/bookings/${b.booking_id}/${verb}`, { body: text ? { reason: text } : {}, action: actions[verb] });
      toast(t('booking.done', { action: t(`action.${verb}`), status: t(`status.${after.status}`) }));
      await ctx.reload();
    });
  });
  return form;
}

export async function render(ctx) {
  const { root, venue } = ctx;
  root.append(h('h1', {}, t('nav.approvals')));
  if (!venue) return root.append(noVenue());
  const [items, resources] = await Promise.all([listAll('/admin/bookings', { venue_id: venue.venue_id, status: 'PENDING_APPROVAL' }), venueResources(venue.venue_id)]);
  if (!ctx.isCurrent()) return;
  // Without a deadline (never expected) a booking sorts last rather than breaking the order.
  const due = (b) => (b.approval_deadline ? Date.parse(b.approval_deadline) : Infinity);
  items.sort((a, b) => due(a) - due(b));
  root.append(h('p', { class: 'lead' }, t('approvals.lead')));
  if (!items.length) return root.append(h('div', { class: 'empty', 'data-test': 'approvals-empty' }, t('approvals.none')));
  const names = namesById(resources);
  root.append(h('div', { class: 'approvals', 'data-test': 'approvals' }, items.map((b) => approvalRow(b, names, ctx))));
}
