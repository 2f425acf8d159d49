// 预约 Bookings: the venue's bookings, searched by what a guest at the desk names (booking id,
// check-in code or user id: the API's q), filtered by day, status and resource, a page at a time.
// A check-in box sits on top, since checking a guest in is the desk's most common act.

import { api, newAction } from '../api.js';
import { t } from '../i18n.js';
import { STATUSES, dateTime, fill, formError, h, hm, money, select, statusBadge, submitForm, toast } from '../ui.js';
import { namesById, noVenue, venueResources } from '../venue.js';

const PAGE_SIZE = 25;

function checkinCard() {
  const action = newAction();
  const code = h('input', { name: 'checkin_code', 'data-test': 'quick-checkin-code', placeholder: t('bookings.codePlaceholder'), autocomplete: 'off', required: true });
  const result = h('div', { class: 'checkin-result' });
  const form = h(
    'form',
    { class: 'inline-form', 'data-test': 'quick-checkin-form' },
    h('label', { class: 'field' }, h('span', { class: 'field-label' }, t('bookings.checkinTitle')), code, h('div', { class: 'field-error', 'data-test': 'error-checkin_code', 'data-field': 'checkin_code', hidden: true })),
    h('button', { type: 'submit', class: 'btn btn-primary btn-big', 'data-test': 'quick-checkin-submit' }, t('action.checkin')),
    formError(),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    fill(result);
    submitForm(form, async () => {
      const b = await api('POST', '/checkins', { body: { checkin_code: code.value.trim() }, action }).catch((err) => {
        // The API's 404 says only "no such object"; at the desk that means a mistyped code.
        if (err.status === 404) Object.assign(err, { field: 'checkin_code', message: t('bookings.noSuchCode') });
        throw err;
      });
      toast(t('bookings.checkedIn', { id: b.booking_id }));
      fill(result, h('a', { href: `#/booking/${b.booking_id}` }, `#${b.booking_id}`), ' ', statusBadge(b.status), ` ${b.user_id || ''} · ${dateTime(b.start)}–${hm(b.end)}`);
      code.value = '';
    });
  });
  return h('section', { class: 'card card-accent' }, form, result);
}

function filterForm(ctx, resources) {
  const q = ctx.query;
  const form = h(
    'form',
    { class: 'filters', 'data-test': 'booking-filters' },
    h('input', { type: 'search', name: 'q', value: q.q || '', placeholder: t('bookings.searchPlaceholder'), 'data-test': 'search', 'aria-label': t('bookings.search'), class: 'search' }),
    h('input', { type: 'date', name: 'date', value: q.date || '', 'data-test': 'filter-date', 'aria-label': t('bookings.date') }),
    select('status', [['', t('bookings.anyStatus')], ...STATUSES.map((s) => [s, t(`status.${s}`)])], q.status, { 'data-test': 'filter-status', 'aria-label': t('bookings.status') }),
    select('resource_id', [['', t('bookings.anyResource')], ...resources.map((r) => [r.resource_id, r.name])], q.resource_id, { 'data-test': 'filter-resource', 'aria-label': t('bookings.resource') }),
    h('button', { type: 'submit', class: 'btn btn-primary', 'data-test': 'search-submit' }, t('bookings.searchButton')),
    h('a', { class: 'btn btn-ghost', href: '#/bookings', 'data-test': 'search-reset' }, t('bookings.reset')),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = new FormData(form);
    ctx.go('bookings', { q: f.get('q').trim(), date: f.get('date'), status: f.get('status'), resource_id: f.get('resource_id') });
  });
  return form;
}

function table(items, names) {
  if (!items.length) return h('div', { class: 'empty', 'data-test': 'bookings-empty' }, t('bookings.none'));
  const cols = ['id', 'status', 'resource', 'time', 'user', 'quantity', 'amount', 'code'];
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'table table-hover', 'data-test': 'bookings-table' },
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', { class: c === 'quantity' || c === 'amount' ? 'num' : null }, t(`bookings.col.${c}`))))),
      h(
        'tbody',
        {},
        items.map((b) =>
          h(
            'tr',
            { 'data-test': 'booking-row', 'data-id': b.booking_id, onclick: (e) => e.target.closest('a') || (location.hash = `#/booking/${b.booking_id}`) },
            h('td', {}, h('a', { href: `#/booking/${b.booking_id}` }, `#${b.booking_id}`)),
            h('td', {}, statusBadge(b.status)),
            h('td', {}, names.get(b.resource_id) || `#${b.resource_id}`),
            h('td', { class: 'nowrap' }, `${dateTime(b.start)}–${hm(b.end)}`),
            h('td', {}, b.user_id || '—'),
            h('td', { class: 'num' }, b.quantity),
            h('td', { class: 'num' }, money(b.amount_cents)),
            h('td', { class: 'mono' }, b.checkin_code),
          ),
        ),
      ),
    ),
  );
}

/** Previous/next links. trail holds the cursors of the pages before, so "previous" needs no history. */
function pager(ctx, nextCursor) {
  const trail = ctx.query.trail ? ctx.query.trail.split(',') : [];
  const cursor = ctx.query.cursor || '';
  const base = { q: ctx.query.q, date: ctx.query.date, status: ctx.query.status, resource_id: ctx.query.resource_id };
  const prev = cursor && ctx.link('bookings', { ...base, cursor: trail.at(-1) || '', trail: trail.slice(0, -1).join(',') });
  const next = nextCursor && ctx.link('bookings', { ...base, cursor: nextCursor, trail: cursor ? [...trail, cursor].join(',') : trail.join(',') });
  return h(
    'div',
    { class: 'pager' },
    prev ? h('a', { class: 'btn', href: prev, 'data-test': 'page-prev' }, t('common.prev')) : h('span', { class: 'btn disabled' }, t('common.prev')),
    next ? h('a', { class: 'btn', href: next, 'data-test': 'page-next' }, t('common.next')) : h('span', { class: 'btn disabled' }, t('common.next')),
  );
}

export async function render(ctx) {
  const { root, venue, query } = ctx;
  root.append(h('h1', {}, t('nav.bookings')));
  if (!venue) return root.append(noVenue());
  const resources = await venueResources(venue.venue_id);
  const list = h('div', { class: 'muted' }, t('common.loading'));
  root.append(checkinCard(), h('section', { class: 'card' }, filterForm(ctx, resources), list));
  const filters = { venue_id: venue.venue_id, q: query.q, date: query.date, status: query.status, resource_id: query.resource_id, cursor: query.cursor, limit: PAGE_SIZE };
  try {
    const page = await api('GET', '/admin/bookings', { query: filters });
    if (!ctx.isCurrent()) return;
    list.className = '';
    fill(list, table(page.items || [], namesById(resources)), pager(ctx, page.next_cursor));
  } catch (err) {
    if (!('status' in err)) throw err;
    // A bad filter (an unknown status, a malformed date) is the API's to name; show it above the table.
    list.className = '';
    fill(list, h('div', { class: 'box box-error', 'data-test': `error-${err.field || 'query'}` }, err.message));
  }
}
