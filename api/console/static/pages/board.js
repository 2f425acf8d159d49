// 今日看板 Board: a venue's day (or the week from a day) at a glance. Rows are resources; each
// slot, as /availability lays it out, shows units taken of its capacity and the bookings in it,
// coloured by status. A booking opens its detail page.

import { t } from '../i18n.js';
import { HOLDS_UNITS, STATUSES, addDays, fill, h, hm, isoWeekday, overlaps, statusBadge, todayIn } from '../ui.js';
import { dayAvailability, noVenue, venueBookings, venueResources } from '../venue.js';

const HIDDEN_BY_DEFAULT = new Set(['CANCELLED_BY_USER', 'CANCELLED_BY_ADMIN', 'DECLINED']);
const WEEK_CHIPS = 6; // bookings listed in a week cell before "+N more"
const DENSE_SLOTS = 32; // more slots than this in a day: small cells showing start times only

const isDate = (s) => /^\d{4}-\d{2}-\d{2}$/.test(s || '');

/** Whether a booking takes units of a resource: its own, or one of its roles' (a service with roles). */
function usesResource(b, res) {
  return b.resource_id === res.resource_id || Object.values(b.resources || {}).includes(res.resource_id);
}

function unitsHeld(bookings) {
  return bookings.filter((b) => HOLDS_UNITS.has(b.status)).reduce((n, b) => n + (b.quantity || 1), 0);
}

/**
 * Units taken in a slot. Availability knows them (holds included) while the slot can still be
 * sold; once it is past, closed or out of reach it answers remaining 0, so the bookings count then.
 */
function takenIn(slot, res, bookings) {
  if (slot.available || slot.reason === 'full') return res.capacity - slot.remaining;
  return unitsHeld(bookings);
}

function slotState(slot) {
  if (slot.available) return 'open';
  return ['full', 'closed', 'past'].includes(slot.reason) ? slot.reason : 'unavailable';
}

function bookingChip(b, withTime) {
  const who = b.user_id || `#${b.booking_id}`;
  return h(
    'a',
    { class: `chip st-${b.status}`, href: `#/booking/${b.booking_id}`, 'data-test': 'board-booking', 'data-id': b.booking_id, title: `#${b.booking_id} · ${t(`status.${b.status}`)}` },
    withTime && h('span', { class: 'chip-time' }, hm(b.start)),
    h('span', { class: 'chip-who' }, who),
    b.quantity > 1 && h('span', { class: 'chip-qty' }, `×${b.quantity}`),
  );
}

function slotCell(slot, res, bookings, opts, dense) {
  const inSlot = bookings.filter((b) => usesResource(b, res) && overlaps(b, slot));
  const shown = opts.showCancelled ? inSlot : inSlot.filter((b) => !HIDDEN_BY_DEFAULT.has(b.status));
  const state = slotState(slot);
  const taken = takenIn(slot, res, inSlot);
  // "Full" says nothing that taken = capacity does not; the other reasons do.
  const reason = !['open', 'closed', 'full'].includes(state) && h('span', { class: 'slot-reason' }, t(`slotReason.${slot.reason}`));
  return h(
    'div',
    { class: `slot slot-${state}`, 'data-test': 'board-slot', 'data-start': slot.start, title: `${hm(slot.start)}–${hm(slot.end)}` },
    h('div', { class: 'slot-time' }, dense ? hm(slot.start) : `${hm(slot.start)}–${hm(slot.end)}`),
    h(
      'div',
      { class: 'slot-count' },
      state === 'closed' ? t('slotReason.closed') : dense ? `${taken}/${res.capacity}` : t('board.taken', { n: taken, cap: res.capacity }),
      !dense && reason,
    ),
    shown.length > 0 && h('div', { class: 'slot-bookings' }, shown.map((b) => bookingChip(b, false))),
  );
}

function resourceHead(res) {
  return h(
    'div',
    { class: 'board-res' },
    h('strong', {}, res.name),
    h('span', { class: 'muted' }, `${res.kind} · ${t('board.capacity', { n: res.capacity })}`),
    res.status !== 'active' && h('span', { class: 'badge badge-muted' }, t('resource.disabled')),
  );
}

/** One resource's slots for the day, or a line saying why there are none to show. */
function dayCells(res, slots, bookings, opts) {
  if (slots === null) return { cells: [h('div', { class: 'muted' }, t('board.unknown'))], dense: false };
  if (!slots.length) return { cells: [h('div', { class: 'muted' }, t('board.noSlots'))], dense: false };
  const dense = slots.length > DENSE_SLOTS;
  const shown = (b) => opts.showCancelled || !HIDDEN_BY_DEFAULT.has(b.status);
  const keep = opts.onlyBooked ? slots.filter((s) => bookings.some((b) => shown(b) && usesResource(b, res) && overlaps(b, s))) : slots;
  if (!keep.length) return { cells: [h('div', { class: 'muted' }, t('board.noBookings'))], dense: false };
  return { cells: keep.map((s) => slotCell(s, res, bookings, opts, dense)), dense };
}

function dayView(resources, bookings, avail, date, opts) {
  return h(
    'div',
    { class: 'board-day', 'data-test': 'board-day' },
    resources.map((res) => {
      const { cells, dense } = dayCells(res, avail.get(`${res.resource_id}/${date}`), bookings, opts);
      return h('div', { class: 'board-row', 'data-test': 'board-row', 'data-resource': res.resource_id }, resourceHead(res), h('div', { class: `board-slots${dense ? ' dense' : ''}` }, cells));
    }),
  );
}

function weekCell(res, date, slots, bookings, opts, goDay) {
  const mine = bookings.filter((b) => usesResource(b, res) && b.start.slice(0, 10) === date && (opts.showCancelled || !HIDDEN_BY_DEFAULT.has(b.status)));
  mine.sort((a, b) => a.start.localeCompare(b.start));
  let summary = t('board.unknown');
  if (slots) {
    const open = slots.filter((s) => s.reason !== 'closed');
    const taken = open.reduce((n, s) => n + takenIn(s, res, bookings.filter((b) => usesResource(b, res) && overlaps(b, s))), 0);
    summary = open.length ? t('board.taken', { n: taken, cap: open.length * res.capacity }) : t('slotReason.closed');
  }
  return h(
    'td',
    { class: 'week-cell', 'data-test': 'board-week-cell', 'data-date': date },
    h('div', { class: 'slot-count' }, summary),
    h('div', { class: 'slot-bookings' }, mine.slice(0, WEEK_CHIPS).map((b) => bookingChip(b, true))),
    mine.length > WEEK_CHIPS && h('a', { href: goDay(date), class: 'more' }, t('board.more', { n: mine.length - WEEK_CHIPS })),
  );
}

function weekView(resources, bookings, avail, dates, today, opts, goDay) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'table board-week', 'data-test': 'board-week' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, t('board.resource')),
          dates.map((d) =>
            h('th', { class: d === today ? 'today' : '' }, h('a', { href: goDay(d) }, h('span', {}, t(`weekday.${isoWeekday(d)}`)), h('span', { class: 'muted' }, ` ${d.slice(5)}`))),
          ),
        ),
      ),
      h(
        'tbody',
        {},
        resources.map((res) =>
          h('tr', { 'data-test': 'board-row', 'data-resource': res.resource_id }, h('th', { scope: 'row' }, resourceHead(res)), dates.map((d) => weekCell(res, d, avail.get(`${res.resource_id}/${d}`), bookings, opts, goDay))),
        ),
      ),
    ),
  );
}

function legend() {
  return h(
    'div',
    { class: 'legend', 'aria-label': t('board.legend') },
    STATUSES.map((s) => statusBadge(s)),
  );
}

function toolbar(ctx, state, today) {
  const { date, view } = state;
  const step = view === 'week' ? 7 : 1;
  const to = (over) => ctx.link('board', { ...queryOf(state), ...over });
  const dateInput = h('input', { type: 'date', value: date, 'data-test': 'board-date', 'aria-label': t('board.date'), onchange: (e) => isDate(e.target.value) && (location.hash = to({ date: e.target.value })) });
  const toggle = (name, key) =>
    h('label', { class: 'check' }, h('input', { type: 'checkbox', checked: state[key], 'data-test': `board-${name}`, onchange: (e) => (location.hash = to({ [name]: e.target.checked ? '1' : '' })) }), t(`board.${name}`));
  return h(
    'div',
    { class: 'toolbar' },
    h(
      'div',
      { class: 'btn-group' },
      h('a', { class: 'btn', href: to({ date: addDays(date, -step) }), 'data-test': 'board-prev', 'aria-label': t('board.prev') }, '‹'),
      h('a', { class: 'btn', href: to({ date: today }), 'data-test': 'board-today' }, t('board.today')),
      h('a', { class: 'btn', href: to({ date: addDays(date, step) }), 'data-test': 'board-next', 'aria-label': t('board.next') }, '›'),
    ),
    dateInput,
    h(
      'div',
      { class: 'segmented', role: 'group' },
      h('a', { class: view === 'day' ? 'active' : '', href: to({ view: 'day' }), 'data-test': 'board-view-day' }, t('board.day')),
      h('a', { class: view === 'week' ? 'active' : '', href: to({ view: 'week' }), 'data-test': 'board-view-week' }, t('board.week')),
    ),
    toggle('cancelled', 'showCancelled'),
    view === 'day' && toggle('booked', 'onlyBooked'),
  );
}

function queryOf(state) {
  return { date: state.date, view: state.view, cancelled: state.showCancelled ? '1' : '', booked: state.onlyBooked ? '1' : '' };
}

export async function render(ctx) {
  const { root, venue, query } = ctx;
  root.append(h('h1', {}, t('nav.board')));
  if (!venue) return root.append(noVenue());
  const today = todayIn(venue.timezone);
  const state = {
    date: isDate(query.date) ? query.date : today,
    view: query.view === 'week' ? 'week' : 'day',
    showCancelled: query.cancelled === '1',
    onlyBooked: query.booked === '1',
  };
  const days = state.view === 'week' ? 7 : 1;
  const dates = Array.from({ length: days }, (_, i) => addDays(state.date, i));
  const body = h('div', { class: 'muted' }, t('common.loading'));
  const heading = state.view === 'week' ? t('board.weekOf', { from: dates[0], to: dates[6] }) : `${state.date} ${t(`weekday.${isoWeekday(state.date)}`)}${state.date === today ? ` · ${t('board.today')}` : ''}`;
  root.append(toolbar(ctx, state, today), h('h2', { class: 'board-heading', 'data-test': 'board-heading' }, heading), legend(), body);

  const [resources, bookings] = await Promise.all([venueResources(venue.venue_id), venueBookings(venue.venue_id, state.date, days)]);
  const avail = new Map();
  await Promise.all(resources.flatMap((r) => dates.map(async (d) => avail.set(`${r.resource_id}/${d}`, await dayAvailability(r.resource_id, d)))));
  if (!ctx.isCurrent()) return;
  if (!resources.length) return fill(body, h('div', { class: 'empty' }, t('board.noResources')));
  const goDay = (d) => ctx.link('board', { ...queryOf(state), date: d, view: 'day' });
  body.className = '';
  fill(body, state.view === 'week' ? weekView(resources, bookings, avail, dates, today, state, goDay) : dayView(resources, bookings, avail, state.date, state));
}
