// 预约详情 Booking detail: every field of one booking, its status history, and the desk's actions
// that its status allows (approve, decline, cancel with a refund choice, restore on appeal, check in).

import { api, newAction } from '../api.js';
import { has, t } from '../i18n.js';
import { card, dateTime, field, fieldError, fill, formError, h, hm, instant, money, statusBadge, submitForm, timeLeft, toast } from '../ui.js';
import { namesById, venueResources } from '../venue.js';

// What the desk may do in each status (engine/booking's transition table); other statuses are final.
const ACTIONS = {
  PENDING_APPROVAL: ['approve', 'decline', 'cancel'],
  CONFIRMED: ['checkin', 'cancel'],
  ARRIVED: ['cancel'],
  RELEASED: ['restore', 'checkin'],
};

function row(label, value, test) {
  return [h('dt', {}, label), h('dd', { 'data-test': test }, value ?? '—')];
}

function details(b, resourceName, ctx) {
  const left = b.approval_deadline && timeLeft(b.approval_deadline);
  const userLink = b.user_id && (ctx.user.role === 'admin' ? h('a', { href: ctx.link(`users/${encodeURIComponent(b.user_id)}`) }, b.user_id) : b.user_id);
  return h(
    'dl',
    { class: 'details' },
    row(t('booking.status'), statusBadge(b.status), 'booking-status'),
    row(t('booking.resource'), resourceName),
    b.resources && row(t('booking.roles'), Object.entries(b.resources).map(([role, id]) => `${role}: #${id}`).join(', ')),
    b.service_id && row(t('booking.service'), `#${b.service_id}`),
    row(t('booking.time'), `${dateTime(b.start)}–${hm(b.end)}`),
    row(t('booking.quantity'), b.quantity),
    row(t('booking.user'), userLink, 'booking-user'),
    row(t('booking.amount'), money(b.amount_cents)),
    row(t('booking.code'), h('span', { class: 'mono' }, b.checkin_code), 'booking-code'),
    b.approval_deadline && row(t('booking.approvalDeadline'), `${dateTime(b.approval_deadline)} (${left ? t('time.left', { left }) : t('time.passed')})`),
    row(t('booking.releaseAt'), instant(b.release_at)),
    row(t('booking.confirmedAt'), instant(b.confirmed_at)),
    b.checked_in_at && row(t('booking.checkedInAt'), instant(b.checked_in_at)),
    b.released_at && row(t('booking.releasedAt'), instant(b.released_at)),
    b.cancelled_at && row(t('booking.cancelledAt'), instant(b.cancelled_at)),
    b.payment_id && row(t('booking.payment'), h('span', { class: 'mono' }, b.payment_id)),
    row(t('booking.hold'), h('span', { class: 'mono' }, b.hold_id)),
  );
}

function history(items) {
  if (!items.length) return h('div', { class: 'empty' }, t('booking.noHistory'));
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'table', 'data-test': 'history' },
      h('thead', {}, h('tr', {}, ['at', 'change', 'actor', 'reason'].map((c) => h('th', {}, t(`booking.history.${c}`))))),
      h(
        'tbody',
        {},
        items.map((e) =>
          h(
            'tr',
            { 'data-test': 'history-row' },
            h('td', { class: 'nowrap' }, instant(e.at)),
            h('td', { class: 'nowrap' }, statusBadge(e.from), ' → ', statusBadge(e.to)),
            h('td', {}, actorLabel(e.actor)),
            h('td', {}, reasonText(e.reason)),
          ),
        ),
      ),
    ),
  );
}

/**
 * The server writes a history reason as its action's English words, then what staff typed
 * ("declined: court under repair"); the words it uses are shown in the console's language.
 */
function reasonText(reason) {
  if (!reason) return '—';
  const cut = reason.indexOf(': ');
  const [head, rest] = cut < 0 ? [reason, ''] : [reason.slice(0, cut), reason.slice(cut + 2)];
  if (!has(`reason.${head}`)) return reason;
  return rest ? `${t(`reason.${head}`)}${t('reason.separator')}${rest}` : t(`reason.${head}`);
}

/** "staff:desk-1" → "前台 desk-1"; "system" → "系统". */
function actorLabel(actor) {
  if (actor === 'system') return t('actor.system');
  const [role, ...rest] = actor.split(':');
  return rest.length ? `${t(`role.${role}`)} ${rest.join(':')}` : actor;
}

/** The request each action makes. */
function request(verb, b, reason, refund) {
  if (verb === 'checkin') return ['/checkins', { checkin_code: b.checkin_code }];
  const body = reason ? { reason } : {};
  if (verb === 'cancel') body.refund = refund;
  return [`/admin/bookings/${b.booking_id}/${verb}`, body];
}

function actionsForm(b, ctx) {
  const verbs = ACTIONS[b.status] || [];
  if (!verbs.length) return h('p', { class: 'muted', 'data-test': 'no-actions' }, t('booking.final'));
  const actions = Object.fromEntries(verbs.map((v) => [v, newAction()]));
  const needsReason = verbs.some((v) => v !== 'checkin');
  const reason = h('textarea', { name: 'reason', rows: 2, maxlength: 160, 'data-test': 'reason', placeholder: t('booking.reasonPlaceholder') });
  const refund = h(
    'div',
    { class: 'radios', 'data-test': 'refund' },
    ['full', 'policy'].map((r) => h('label', { class: 'check' }, h('input', { type: 'radio', name: 'refund', value: r, checked: r === 'full', 'data-test': `refund-${r}` }), t(`booking.refund.${r}`))),
    fieldError('refund'),
  );
  const form = h(
    'form',
    { class: 'form', 'data-test': 'actions-form' },
    formError(),
    needsReason && field(t('booking.reason'), reason, 'reason', t('booking.reasonHint')),
    verbs.includes('cancel') && h('div', { class: 'field' }, h('span', { class: 'field-label' }, t('booking.refundLabel')), refund),
    h('div', { class: 'action-buttons' }, verbs.map((v) => h('button', { type: 'submit', class: `btn btn-big btn-${v}`, 'data-action': v, 'data-test': `action-${v}` }, t(`action.${v}`)))),
    h('ul', { class: 'action-notes' }, verbs.map((v) => h('li', {}, h('strong', {}, t(`action.${v}`)), ' — ', t(`booking.note.${v}`)))),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const verb = e.submitter?.dataset.action;
    if (!verb) return;
    const [path, body] = request(verb, b, reason.value.trim(), form.refund?.value || 'full');
    submitForm(form, async () => {
      const after = await api('POST', path, { body, action: actions[verb] });
      toast(t('booking.done', { action: t(`action.${verb}`), status: t(`status.${after.status}`) }));
      await ctx.reload();
    });
  });
  return form;
}

export async function render(ctx) {
  const { root, params } = ctx;
  const id = params.id;
  root.append(h('div', { class: 'crumbs' }, h('a', { href: '#/bookings' }, t('nav.bookings')), ' / ', `#${id}`));
  const [b, hist] = await Promise.all([api('GET', `/bookings/${id}`), api('GET', `/bookings/${id}/history`)]);
  const resources = await venueResources(b.venue_id).catch(() => []);
  if (!ctx.isCurrent()) return;
  const name = namesById(resources).get(b.resource_id) || `#${b.resource_id}`;
  const head = h('h1', {}, t('booking.title', { id: b.booking_id }), ' ', statusBadge(b.status));
  const actions = card(t('booking.actions'), actionsForm(b, ctx));
  fill(
    root,
    root.firstChild,
    head,
    h('div', { class: 'grid-2' }, card(t('booking.details'), details(b, name, ctx)), actions),
    card(t('booking.historyTitle'), history(hist.items || [])),
  );
}
