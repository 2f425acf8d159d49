// Small DOM and formatting helpers shared by the pages: building elements, money and venue-local
// times, status badges, the page banner, and showing the API's errors where the operator looks.

import { t } from './i18n.js';

/**
 * h('div', {class: 'x', 'data-test': 'y', onclick: fn}, child, ...) builds an element. Props named
 * on* become listeners; value, checked, disabled and selected are set as properties; children may
 * be strings, nodes, arrays, or null/false (skipped).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  // The API is the one judge of input and names the field it blames; the browser's own checks
  // (min, type=number) would stop a form before the API could say what is wrong, in its words.
  if (tag === 'form') el.noValidate = true;
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

/** Replaces el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// ---- money: cents in the API, yuan on screen and in forms ----

export function money(cents) {
  if (cents === undefined || cents === null) return '—';
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}¥${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

/** "50", "50.5" or "¥50.05" → 5005; anything else → NaN, which the API then refuses with its own message. */
export function yuanToCents(text) {
  const m = String(text).trim().replace(/^¥/, '').match(/^(\d+)(?:\.(\d{1,2}))?$/);
  if (!m) return NaN;
  return Number(m[1]) * 100 + Number((m[2] || '').padEnd(2, '0'));
}

export function centsToYuan(cents) {
  return money(cents).replace('¥', '');
}

// ---- time: the API answers in the venue's offset, so its wall-clock digits are the venue's time ----

export const hm = (iso) => (iso ? iso.slice(11, 16) : '');
const ymd = (iso) => (iso ? iso.slice(0, 10) : '');
export const dateTime = (iso) => (iso ? `${ymd(iso)} ${hm(iso)}` : '—');

/**
 * An instant something happened or will (a status change, a release), to the second when it is not
 * on a whole minute: events of one booking can be seconds apart, and a history in minutes would
 * show them all at once.
 */
export const instant = (iso) => (iso ? `${ymd(iso)} ${iso.slice(17, 19) === '00' ? hm(iso) : iso.slice(11, 19)}` : '—');

/**
 * A time the API answers in UTC (tasks, freezes: things that span venues) as "YYYY-MM-DD HH:MM"
 * in a time zone — the venue's when there is one, else the browser's.
 */
export function zonedDateTime(iso, timeZone) {
  if (!iso) return '—';
  const opts = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' };
  try {
    return new Intl.DateTimeFormat('sv-SE', { ...opts, timeZone }).format(new Date(iso));
  } catch {
    return new Intl.DateTimeFormat('sv-SE', opts).format(new Date(iso));
  }
}

/** Today's date (YYYY-MM-DD) in an IANA time zone. */
export function todayIn(timeZone) {
  try {
    return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
  } catch {
    return new Date().toISOString().slice(0, 10);
  }
}

export function addDays(date, n) {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

/** ISO weekday of a YYYY-MM-DD date: 1 = Monday … 7 = Sunday, as the API counts them. */
export function isoWeekday(date) {
  return new Date(`${date}T00:00:00Z`).getUTCDay() || 7;
}

/** "2小时5分" / "2h 5m" until iso; null once it has passed. */
export function timeLeft(iso) {
  const ms = Date.parse(iso) - Date.now();
  if (!(ms > 0)) return null;
  const mins = Math.ceil(ms / 60000);
  const d = Math.floor(mins / 1440);
  const hrs = Math.floor((mins % 1440) / 60);
  const m = mins % 60;
  if (d > 0) return t('time.dh', { d, h: hrs });
  if (hrs > 0) return t('time.hm', { h: hrs, m });
  return t('time.m', { m });
}

export function overlaps(a, b) {
  return Date.parse(a.start) < Date.parse(b.end) && Date.parse(b.start) < Date.parse(a.end);
}

// ---- booking statuses ----

export const STATUSES = ['PENDING_APPROVAL', 'CONFIRMED', 'ARRIVED', 'IN_PROGRESS', 'COMPLETED', 'RELEASED', 'CANCELLED_BY_USER', 'CANCELLED_BY_ADMIN', 'DECLINED'];

/** Statuses whose booking holds its units (the others gave them back). */
export const HOLDS_UNITS = new Set(['PENDING_APPROVAL', 'CONFIRMED', 'ARRIVED', 'IN_PROGRESS']);

export function statusBadge(status) {
  return h('span', { class: `badge st-${status}`, 'data-status': status }, t(`status.${status}`));
}

// ---- the page banner ----

let toastTimer = 0;

/** Shows a message in the page's status banner; successes fade, errors stay until the next message. */
export function toast(message, kind = 'ok') {
  const el = document.querySelector('[data-test="toast"]');
  if (!el) return;
  clearTimeout(toastTimer);
  el.className = `toast toast-${kind}`;
  el.hidden = false;
  fill(el, h('span', {}, message), h('button', { type: 'button', class: 'toast-close', 'aria-label': t('common.close'), onclick: () => (el.hidden = true) }, '×'));
  if (kind === 'ok') toastTimer = setTimeout(() => (el.hidden = true), 5000);
}

/** Hides the banner: its message was about an action before the one starting now. */
export function hideToast() {
  const el = document.querySelector('[data-test="toast"]');
  if (!el) return;
  clearTimeout(toastTimer);
  el.hidden = true;
}

// ---- forms and errors ----

/** The element a field's API error is shown in; its name is the API's field path (weekly[1].open). */
export function fieldError(name) {
  return h('div', { class: 'field-error', 'data-test': `error-${name}`, 'data-field': name, role: 'alert', hidden: true });
}

/** A labelled form field: label, the control, an optional hint, and its error element. */
export function field(label, control, name, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label), control, hint && h('span', { class: 'field-hint' }, hint), fieldError(name));
}

export function input(name, props = {}) {
  return h('input', { name, 'data-test': `input-${name}`, ...props });
}

export function select(name, options, value, props = {}) {
  return h(
    'select',
    { name, 'data-test': `input-${name}`, ...props },
    options.map(([v, label]) => h('option', { value: v, selected: String(v) === String(value ?? '') }, label)),
  );
}

export function submitButton(label, test) {
  return h('button', { type: 'submit', class: 'btn btn-primary', 'data-test': test }, label);
}

/** The message an error deserves: "not allowed" for 403, the API's own message otherwise. */
export function errorMessage(err) {
  if (err.status === 403) return t('error.forbidden');
  return err.message || String(err);
}

function clearErrors(form) {
  for (const el of form.querySelectorAll('.field-error, .form-error')) {
    el.hidden = true;
    el.textContent = '';
  }
  for (const el of form.querySelectorAll('.has-error')) el.classList.remove('has-error');
}

/**
 * Shows an API error under the field it names — or under its closest named parent
 * (weekly[1].weekdays → weekly[1] → weekly) — and at the top of the form when no field matches.
 */
export function showError(form, err) {
  let target = null;
  for (let name = err.field; name && !target; name = parentField(name)) {
    target = form.querySelector(`.field-error[data-field="${CSS.escape(name)}"]`);
  }
  if (!target) target = form.querySelector('.form-error');
  if (!target) form.prepend((target = formError()));
  fill(target, messageAt(target, err), affectedBookings(err));
  target.hidden = false;
  target.closest('.field')?.classList.add('has-error');
  target.scrollIntoView({ block: 'nearest' });
}

/** The bookings a conflict names (capacity_conflict, schedule_conflict), as links to their pages. */
function affectedBookings(err) {
  const ids = err.details?.booking_ids;
  if (!Array.isArray(ids) || !ids.length) return null;
  return h('div', { class: 'affected' }, t('error.affected'), ' ', ids.map((id) => h('a', { href: `#/booking/${id}`, 'data-test': 'affected-booking' }, `#${id}`)));
}

/**
 * The message shown at target. The API ends a message that blames a field with its name
 * ("（字段：capacity）", " (field: capacity)") for clients that show it alone; under that very
 * field it says nothing more, and is left out.
 */
function messageAt(target, err) {
  const message = errorMessage(err);
  if (!err.field || target.dataset.field !== err.field) return message;
  for (const suffix of [`（字段：${err.field}）`, ` (field: ${err.field})`]) {
    if (message.endsWith(suffix)) return message.slice(0, -suffix.length);
  }
  return message;
}

function parentField(name) {
  const cut = Math.max(name.lastIndexOf('.'), name.lastIndexOf('['));
  return cut > 0 ? name.slice(0, cut) : '';
}

/**
 * Runs a form's one request: errors cleared, submit button disabled meanwhile, an ApiError shown
 * where it belongs. Answers whether it succeeded.
 */
export async function submitForm(form, run) {
  clearErrors(form);
  hideToast();
  const buttons = [...form.querySelectorAll('button[type=submit]')];
  buttons.forEach((b) => (b.disabled = true));
  try {
    await run();
    return true;
  } catch (err) {
    if (!(err && 'status' in err)) throw err;
    showError(form, err);
    return false;
  } finally {
    buttons.forEach((b) => (b.disabled = false));
  }
}

/** The top-of-form error slot; forms put it first so that a field-less error has a home. */
export function formError() {
  return h('div', { class: 'form-error', role: 'alert', 'data-test': 'form-error', hidden: true });
}

// ---- page-level boxes ----

/** What a page shows when its data cannot be loaded: "not available" for a route the server lacks. */
export function errorBox(err) {
  if (err.routeMissing) return notAvailable();
  return h('div', { class: 'box box-error', role: 'alert', 'data-test': 'page-error' }, errorMessage(err));
}

export function notAvailable() {
  return h('div', { class: 'box box-muted', 'data-test': 'not-available' }, h('strong', {}, t('common.notAvailable')), h('p', {}, t('common.notAvailableHint')));
}

export function empty(text) {
  return h('div', { class: 'empty' }, text);
}

export function card(title, ...children) {
  return h('section', { class: 'card' }, title && h('h2', { class: 'card-title' }, title), ...children);
}

/** A weekday picker (1 = Monday … 7 = Sunday) as checkboxes named name; checked lists the ticked ones. */
export function weekdayBoxes(name, checked = []) {
  return h(
    'div',
    { class: 'weekdays', 'data-name': name },
    [1, 2, 3, 4, 5, 6, 7].map((d) =>
      h('label', { class: 'weekday' }, h('input', { type: 'checkbox', value: d, checked: checked.includes(d), 'data-test': `weekday-${d}` }), h('span', {}, t(`weekday.${d}`))),
    ),
  );
}

/** Times as the API writes them, HH:MM; a text box, since a time picker cannot say 24:00. */
export function timeBox(name, value) {
  return h('input', { name, value: value || '', placeholder: 'HH:MM', class: 'time', inputmode: 'numeric', 'data-test': `input-${name}` });
}

export function removeButton(onclick) {
  return h('button', { type: 'button', class: 'btn btn-ghost btn-small', onclick, 'data-test': 'row-remove' }, t('common.remove'));
}

/**
 * Names each row's error elements by its current index (weekly[1].weekdays), so that the API's
 * field paths find them after rows were added or removed.
 */
export function indexRows(list, prefix) {
  [...list.children].forEach((row, i) => {
    for (const el of row.querySelectorAll('.field-error')) {
      const leaf = el.dataset.leaf ?? (el.dataset.leaf = el.dataset.field);
      const name = leaf ? `${prefix}[${i}].${leaf}` : `${prefix}[${i}]`;
      el.dataset.field = name;
      el.dataset.test = `error-${name}`;
    }
  });
}

export function checkedWeekdays(box) {
  return [...box.querySelectorAll('input:checked')].map((i) => Number(i.value));
}

/** A number from a form input; an empty or malformed one becomes NaN… which JSON sends as null, so the API names the field. */
export function num(value) {
  return value === '' ? NaN : Number(value);
}
